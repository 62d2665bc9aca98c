//! Every metric name, unit and attribute key this crate emits, in one place.
//!
//! Names follow the OpenTelemetry semantic conventions for hardware (`hw.*`, development
//! status at the time of writing). Where the conventions have no name for what NVML reports,
//! the name stays in the `hw.gpu.*` namespace and the choice is written down here:
//!
//! - [`GPU_CLOCK`] (`hw.gpu.clock`, `Hz`, by [`GPU_CLOCK_TYPE`]): NVML's current clocks.
//! - [`FAN_SPEED_RATIO`] (`hw.fan.speed_ratio`, `1`): the conventions' fan metric for a speed
//!   given as a fraction of the maximum, which is what NVML reports. As the conventions ask, a
//!   fan is its own component: `hw.type=fan`, `hw.id` = the GPU's id and `-fan-<n>`,
//!   `hw.parent` = the GPU's id; it keeps the GPU's `hw.gpu.index`, `hw.name` and `hw.model` and
//!   adds [`GPU_FAN_INDEX`].
//! - [`GPU_MEMORY_BANDWIDTH_UTILIZATION`] (`hw.gpu.memory.bandwidth.utilization`, `1`): the
//!   fraction of time device memory was read or written (NVML's `utilization.memory`, DCGM's
//!   `DCGM_FI_DEV_MEM_COPY_UTIL`). Not to be confused with [`GPU_MEMORY_UTILIZATION`], which is
//!   capacity: used / total bytes.
//! - [`GPU_XID_ERRORS`] (`hw.gpu.xid.errors`, `{error}`, counter by [`GPU_XID`]): NVIDIA's XID
//!   error events. Not folded into `hw.errors`, which counts ECC errors: an XID is a driver
//!   event code, not a memory error, and a sum over `hw.errors` must not mix the two.
//! - [`GPU_CLOCK_THROTTLE`] (`hw.gpu.clock.throttle`, `1`, by [`GPU_CLOCK_THROTTLE_REASON`]):
//!   a state set like [`STATUS`]: 1 for each reason holding the clocks down now, 0 for the
//!   other reasons the device supports; an up-down counter as `hw.status` is, so Prometheus
//!   adds no `_ratio`.
//! - [`GPU_POWER_LIMIT`] (`hw.gpu.power.limit`, `W`): the enforced power limit.
//! - [`GPU_MEMORY_REMAPPED_ROWS`], [`GPU_MEMORY_ROW_REMAP_PENDING`],
//!   [`GPU_MEMORY_ROW_REMAP_FAILURE`], [`GPU_MEMORY_RETIRED_PAGES`],
//!   [`GPU_MEMORY_RETIRED_PAGES_PENDING`]: NVML's row remapping (Ampere and later) and page
//!   retirement (older data-centre parts) state.
//! - [`GPU_INFO`] (`pipetel.gpu.info`, always 1): one series per device carrying what does not
//!   belong on every series, the CUDA driver version ([`GPU_CUDA_DRIVER_VERSION`]).
//!
//! Every GPU series carries the conventions' recommended `hw.model` (the product name) and,
//! where the driver gives it, `hw.driver_version`.
//! - [`GPU_PCIE_THROUGHPUT`] (`hw.gpu.pcie.throughput`, `By/s`, by [`NETWORK_IO_DIRECTION`]):
//!   NVML gives a rate over a 20 ms window, not the byte total `hw.gpu.io` asks for.
//! - [`GPU_PROCESS_MEMORY_USAGE`] (`pipetel.gpu.process.memory.usage`, `By`, by
//!   [`PROCESS_PID`]): memory used on a GPU by this process (and, opted in, by each of its
//!   descendants); not a semantic-convention metric.
//!
//! - GPM activity (NVML's GPU Performance Monitoring, Hopper and later; DCGM's profiling
//!   fields): [`GPU_SM_ACTIVITY`] (`hw.gpu.sm.activity`, DCGM `SM_ACTIVE`),
//!   [`GPU_SM_OCCUPANCY`] (`hw.gpu.sm.occupancy`), [`GPU_TENSOR_ACTIVITY`]
//!   (`hw.gpu.tensor.activity` by [`GPU_TENSOR_PIPE`]: `any`, `dfma`, `hmma`, `imma`),
//!   [`GPU_PIPE_ACTIVITY`] (`hw.gpu.pipe.activity` by [`GPU_PIPE`]: `fp16`, `fp32`, `fp64`),
//!   [`GPU_DRAM_ACTIVITY`] (`hw.gpu.dram.activity`, DCGM `DRAM_ACTIVE`) and
//!   [`GPU_NVLINK_THROUGHPUT`] (`hw.gpu.nvlink.throughput`, `By/s`); all ratios 0–1 over the
//!   poll interval except the throughput. The conventions have no names for them.
//! - MIG instances: a series with [`GPU_MIG_ID`] (`hw.gpu.mig.id`, the MIG device's UUID) is
//!   one MIG instance of the GPU its other attributes name; a series without it is the whole
//!   GPU. Memory ([`GPU_MEMORY_USAGE`], [`GPU_MEMORY_LIMIT`]) and the GPM families have them.
//! - Per-process use, one series per process with [`PROCESS_PID`] (the conventions'
//!   `process.pid`): [`GPU_PROCESS_UTILIZATION`] (`pipetel.gpu.process.utilization` by
//!   [`GPU_TASK`]), [`GPU_PROCESS_MEMORY_BANDWIDTH_UTILIZATION`] and
//!   [`GPU_PROCESS_MEMORY_USAGE`].
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
/// Fan speed as a fraction of its maximum, one series per fan of a GPU (`hw.type=fan`).
pub const FAN_SPEED_RATIO: &str = "hw.fan.speed_ratio";
/// Fraction of time device memory was read or written (bandwidth, not capacity).
pub const GPU_MEMORY_BANDWIDTH_UTILIZATION: &str = "hw.gpu.memory.bandwidth.utilization";
/// XID error events since the poller started (observable counter), by [`GPU_XID`].
pub const GPU_XID_ERRORS: &str = "hw.gpu.xid.errors";
/// Clock throttle reasons as a state set: 1 for each active reason, 0 for the other supported
/// ones, by [`GPU_CLOCK_THROTTLE_REASON`].
pub const GPU_CLOCK_THROTTLE: &str = "hw.gpu.clock.throttle";
/// Enforced power limit, watts.
pub const GPU_POWER_LIMIT: &str = "hw.gpu.power.limit";
/// Memory rows remapped, by [`GPU_MEMORY_ERROR_CAUSE`] (`correctable` / `uncorrectable`).
pub const GPU_MEMORY_REMAPPED_ROWS: &str = "hw.gpu.memory.remapped_rows";
/// 1 while a row remapping waits for a GPU reset.
pub const GPU_MEMORY_ROW_REMAP_PENDING: &str = "hw.gpu.memory.row_remap.pending";
/// 1 when a row remapping failed (the GPU needs service).
pub const GPU_MEMORY_ROW_REMAP_FAILURE: &str = "hw.gpu.memory.row_remap.failure";
/// Memory pages retired, by [`GPU_MEMORY_ERROR_CAUSE`] (`single_bit` / `double_bit`).
pub const GPU_MEMORY_RETIRED_PAGES: &str = "hw.gpu.memory.retired_pages";
/// 1 while page retirements wait for a reboot.
pub const GPU_MEMORY_RETIRED_PAGES_PENDING: &str = "hw.gpu.memory.retired_pages.pending";
/// One series per device, value 1, with [`GPU_CUDA_DRIVER_VERSION`] beside the identity.
pub const GPU_INFO: &str = "pipetel.gpu.info";
/// Device status: 1 for the current [`HW_STATE`], 0 for the others. An up-down counter of unit
/// `1`, as the conventions define it: Prometheus calls it `hw_status` on every route (only
/// gauges of unit `1` get `_ratio`).
pub const STATUS: &str = "hw.status";
/// PCIe throughput, bytes per second, by [`NETWORK_IO_DIRECTION`] (opt-in).
pub const GPU_PCIE_THROUGHPUT: &str = "hw.gpu.pcie.throughput";
/// GPU memory used by one process, bytes, by [`PROCESS_PID`]: this process, and with
/// [`crate::ENV_GPU_PROCESS_MEMORY`] each of its descendants.
pub const GPU_PROCESS_MEMORY_USAGE: &str = "pipetel.gpu.process.memory.usage";

/// GPM: fraction of time each SM had at least one warp assigned, averaged over the SMs
/// (NVML `SM_UTIL`, DCGM `DCGM_FI_PROF_SM_ACTIVE`).
pub const GPU_SM_ACTIVITY: &str = "hw.gpu.sm.activity";
/// GPM: resident warps as a fraction of the maximum, averaged over the SMs (DCGM
/// `DCGM_FI_PROF_SM_OCCUPANCY`).
pub const GPU_SM_OCCUPANCY: &str = "hw.gpu.sm.occupancy";
/// GPM: fraction of time a tensor pipe was active, by [`GPU_TENSOR_PIPE`] (DCGM
/// `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE` and its DFMA / HMMA / IMMA fields).
pub const GPU_TENSOR_ACTIVITY: &str = "hw.gpu.tensor.activity";
/// GPM: fraction of time a non-tensor floating-point pipe was active, by [`GPU_PIPE`] (DCGM
/// `DCGM_FI_PROF_PIPE_FP16_ACTIVE` / `FP32` / `FP64`).
pub const GPU_PIPE_ACTIVITY: &str = "hw.gpu.pipe.activity";
/// GPM: device memory bandwidth used as a fraction of the maximum (NVML `DRAM_BW_UTIL`, DCGM
/// `DCGM_FI_PROF_DRAM_ACTIVE`).
pub const GPU_DRAM_ACTIVITY: &str = "hw.gpu.dram.activity";
/// GPM: NVLink bytes per second over all links, by [`NETWORK_IO_DIRECTION`] (DCGM
/// `DCGM_FI_PROF_NVLINK_TX_BYTES` / `RX_BYTES`).
pub const GPU_NVLINK_THROUGHPUT: &str = "hw.gpu.nvlink.throughput";
/// Utilisation of a GPU by one process, ratio 0–1, by [`GPU_TASK`] and [`PROCESS_PID`].
pub const GPU_PROCESS_UTILIZATION: &str = "pipetel.gpu.process.utilization";
/// Memory-controller (bandwidth) utilisation of a GPU by one process, ratio 0–1, by
/// [`PROCESS_PID`].
pub const GPU_PROCESS_MEMORY_BANDWIDTH_UTILIZATION: &str = "pipetel.gpu.process.memory.bandwidth.utilization";

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
/// Unit of memory rows.
pub const UNIT_ROWS: &str = "{row}";
/// Unit of memory pages.
pub const UNIT_PAGES: &str = "{page}";

/// Attribute: a stable identifier of the device (the NVML UUID, `GPU-…`; for AMD the ROCm SMI
/// unique id, `0x…`, or else the PCI address).
pub const HW_ID: &str = "hw.id";
/// Attribute: the device's product name (kept beside [`HW_MODEL`] so dashboards and alerts
/// that name a GPU by it keep working).
pub const HW_NAME: &str = "hw.name";
/// Attribute: the device's product name, the conventions' "descriptive model name".
pub const HW_MODEL: &str = "hw.model";
/// Attribute: the driver version, on every series when the driver reports it.
pub const HW_DRIVER_VERSION: &str = "hw.driver_version";
/// Attribute of fan series: the `hw.id` of the GPU the fan belongs to.
pub const HW_PARENT: &str = "hw.parent";
/// Attribute of [`GPU_INFO`]: the CUDA driver API version the driver supports, e.g. `12.4`.
pub const GPU_CUDA_DRIVER_VERSION: &str = "hw.gpu.cuda.driver_version";
/// Attribute of [`GPU_XID_ERRORS`]: the XID code, an integer.
pub const GPU_XID: &str = "hw.gpu.xid";
/// Attribute of [`GPU_CLOCK_THROTTLE`]: the reason, one of [`throttle`].
pub const GPU_CLOCK_THROTTLE_REASON: &str = "hw.gpu.clock.throttle.reason";
/// Attribute of [`GPU_MEMORY_REMAPPED_ROWS`] and [`GPU_MEMORY_RETIRED_PAGES`]: one of
/// [`memory_cause`].
pub const GPU_MEMORY_ERROR_CAUSE: &str = "hw.gpu.memory.error.cause";
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
/// Attribute of [`FAN_SPEED_RATIO`]: the fan's index on its GPU.
pub const GPU_FAN_INDEX: &str = "hw.gpu.fan.index";
/// Attribute of [`ERRORS`]: `corrected` or `uncorrected`.
pub const ERROR_TYPE: &str = "error.type";
/// Attribute of [`STATUS`]: `ok` or `failed`.
pub const HW_STATE: &str = "hw.state";
/// Attribute of [`GPU_PCIE_THROUGHPUT`]: `transmit` or `receive`.
pub const NETWORK_IO_DIRECTION: &str = "network.io.direction";

/// Attribute: the MIG device's UUID (`MIG-…`) on the series of one MIG instance.
pub const GPU_MIG_ID: &str = "hw.gpu.mig.id";
/// Attribute of [`GPU_TENSOR_ACTIVITY`]: one of [`tensor_pipe`].
pub const GPU_TENSOR_PIPE: &str = "hw.gpu.tensor.pipe";
/// Attribute of [`GPU_PIPE_ACTIVITY`]: one of [`pipe`].
pub const GPU_PIPE: &str = "hw.gpu.pipe";
/// Attribute of the per-process series: the process id, as NVML reports it (the host's pid).
pub const PROCESS_PID: &str = "process.pid";

/// Value of [`HW_TYPE`] on every series of this crate but the fans'.
pub const HW_TYPE_GPU: &str = "gpu";
/// Value of [`HW_TYPE`] on [`FAN_SPEED_RATIO`].
pub const HW_TYPE_FAN: &str = "fan";
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

/// Values of [`GPU_CLOCK_THROTTLE_REASON`], after NVML's `nvmlClocksThrottleReason*` flags.
pub mod throttle {
    /// Nothing runs on the GPU.
    pub const GPU_IDLE: &str = "gpu_idle";
    /// Application clocks are set lower.
    pub const APPLICATIONS_CLOCKS_SETTING: &str = "applications_clocks_setting";
    /// The software power cap (the power limit) holds the clocks down.
    pub const SW_POWER_CAP: &str = "sw_power_cap";
    /// Hardware slowdown (temperature, power brake, power supply).
    pub const HW_SLOWDOWN: &str = "hw_slowdown";
    /// Synchronised boost with other GPUs.
    pub const SYNC_BOOST: &str = "sync_boost";
    /// Software thermal slowdown.
    pub const SW_THERMAL_SLOWDOWN: &str = "sw_thermal_slowdown";
    /// Hardware thermal slowdown.
    pub const HW_THERMAL_SLOWDOWN: &str = "hw_thermal_slowdown";
    /// Hardware power brake slowdown (an external signal).
    pub const HW_POWER_BRAKE_SLOWDOWN: &str = "hw_power_brake_slowdown";
    /// The display clock setting.
    pub const DISPLAY_CLOCK_SETTING: &str = "display_clock_setting";
}

/// Values of [`GPU_MEMORY_ERROR_CAUSE`].
pub mod memory_cause {
    /// Rows remapped after correctable errors.
    pub const CORRECTABLE: &str = "correctable";
    /// Rows remapped after uncorrectable errors.
    pub const UNCORRECTABLE: &str = "uncorrectable";
    /// Pages retired after multiple single-bit ECC errors.
    pub const SINGLE_BIT: &str = "single_bit";
    /// Pages retired after a double-bit ECC error.
    pub const DOUBLE_BIT: &str = "double_bit";
}

/// Values of [`GPU_TENSOR_PIPE`].
pub mod tensor_pipe {
    /// Any tensor operation.
    pub const ANY: &str = "any";
    /// Double-precision (FP64) tensor operations.
    pub const DFMA: &str = "dfma";
    /// Half-precision (FP16 / BF16) tensor operations.
    pub const HMMA: &str = "hmma";
    /// Integer tensor operations.
    pub const IMMA: &str = "imma";
}

/// Values of [`GPU_PIPE`].
pub mod pipe {
    /// Non-tensor FP16.
    pub const FP16: &str = "fp16";
    /// Non-tensor FP32.
    pub const FP32: &str = "fp32";
    /// Non-tensor FP64.
    pub const FP64: &str = "fp64";
}
