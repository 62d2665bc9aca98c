//! The [`GpuSource`] trait, the sample it returns, and the vendor sources: [`nvml`] (NVIDIA,
//! on `nvml-wrapper`) and `rocm` (AMD, on ROCm SMI; feature `amd`). Both follow the one
//! polling policy of [`policy`].

pub(crate) mod nvml;
mod policy;
#[cfg(feature = "amd")]
pub(crate) mod rocm;

use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::KeyValue;

use crate::error::GpuError;
use crate::names;

/// Something that reads all GPUs of one vendor library at once.
///
/// A source lives on the poller thread: it is created there (opening a vendor library can
/// take seconds or hang) and never crosses threads, so it need not be `Send`.
pub trait GpuSource {
    /// Short platform name for log lines (`nvidia`).
    fn platform(&self) -> &'static str;

    /// Reads every device once. Fields a device cannot report are `None`; a device that
    /// stopped answering has [`DeviceStatus::Failed`].
    ///
    /// # Errors
    ///
    /// [`GpuError::Sample`] when nothing could be read at all.
    fn sample(&mut self) -> Result<GpuSample, GpuError>;
}

/// One poll of all devices; its values were read together and belong together.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GpuSample {
    /// When the poll started.
    pub taken_at: SystemTime,
    /// One entry per device, in index order.
    pub devices: Vec<DeviceSample>,
}

impl GpuSample {
    /// A sample of `devices` taken now.
    pub fn new(devices: Vec<DeviceSample>) -> Self {
        Self { taken_at: SystemTime::now(), devices }
    }
}

/// What identifies a device; read once when the source opens.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceInfo {
    /// Index as the driver numbers devices.
    pub index: u32,
    /// Stable identifier (NVML UUID); `<vendor>-gpu-<index>` when the driver gives none.
    pub id: String,
    /// Product name; empty when the driver gives none.
    pub name: String,
    /// Vendor, e.g. [`names::VENDOR_NVIDIA`].
    pub vendor: &'static str,
    /// Driver version (`hw.driver_version`), when the driver gives it.
    pub driver_version: Option<String>,
    /// CUDA driver API version, e.g. `12.4` (NVIDIA only), for [`names::GPU_INFO`].
    pub cuda_driver_version: Option<String>,
    /// The attributes every series of this device carries, built once.
    attributes: Vec<KeyValue>,
}

impl DeviceInfo {
    /// Identity of device `index`; its product name is both `hw.name` and `hw.model`.
    pub fn new(index: u32, id: String, name: String, vendor: &'static str) -> Self {
        let mut info =
            Self { index, id, name, vendor, driver_version: None, cuda_driver_version: None, attributes: Vec::new() };
        info.build_attributes();
        info
    }

    /// This identity with the driver's versions (`None`: not reported).
    #[must_use]
    pub fn with_versions(mut self, driver: Option<String>, cuda: Option<String>) -> Self {
        self.driver_version = driver;
        self.cuda_driver_version = cuda;
        self.build_attributes();
        self
    }

    fn build_attributes(&mut self) {
        let mut attributes = vec![
            KeyValue::new(names::HW_ID, self.id.clone()),
            KeyValue::new(names::HW_NAME, self.name.clone()),
            KeyValue::new(names::HW_MODEL, self.name.clone()),
            KeyValue::new(names::HW_VENDOR, self.vendor),
            KeyValue::new(names::HW_TYPE, names::HW_TYPE_GPU),
            KeyValue::new(names::GPU_INDEX, i64::from(self.index)),
        ];
        if let Some(v) = &self.driver_version {
            attributes.push(KeyValue::new(names::HW_DRIVER_VERSION, v.clone()));
        }
        self.attributes = attributes;
    }

    /// `hw.id`, `hw.name`, `hw.model`, `hw.vendor`, `hw.type`, `hw.gpu.index` and, when
    /// known, `hw.driver_version` of this device.
    pub fn attributes(&self) -> &[KeyValue] {
        &self.attributes
    }

    /// The attributes of fan `fan` of this device: a component of its own (`hw.type=fan`,
    /// `hw.id` = this id and `-fan-<n>`, `hw.parent` = this id), keeping the GPU's index,
    /// name, model, vendor and driver version, plus `hw.gpu.fan.index`.
    pub fn fan_attributes(&self, fan: u32) -> Vec<KeyValue> {
        let mut attributes: Vec<KeyValue> = self
            .attributes
            .iter()
            .map(|kv| match kv.key.as_str() {
                names::HW_ID => KeyValue::new(names::HW_ID, format!("{}-fan-{fan}", self.id)),
                names::HW_TYPE => KeyValue::new(names::HW_TYPE, names::HW_TYPE_FAN),
                _ => kv.clone(),
            })
            .collect();
        attributes.push(KeyValue::new(names::HW_PARENT, self.id.clone()));
        attributes.push(KeyValue::new(names::GPU_FAN_INDEX, i64::from(fan)));
        attributes
    }
}

/// Row remapping state (NVML, Ampere and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RemappedRows {
    /// Rows remapped after correctable errors.
    pub correctable: u64,
    /// Rows remapped after uncorrectable errors.
    pub uncorrectable: u64,
    /// A remapping waits for a GPU reset.
    pub pending: bool,
    /// A remapping failed.
    pub failure: bool,
}

/// Page retirement state (NVML, older data-centre GPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RetiredPages {
    /// Pages retired after multiple single-bit ECC errors.
    pub single_bit: Option<u64>,
    /// Pages retired after a double-bit ECC error.
    pub double_bit: Option<u64>,
    /// Retirements wait for a reboot.
    pub pending: Option<bool>,
}

/// Whether a device answered in this poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DeviceStatus {
    /// The device answered.
    #[default]
    Ok,
    /// The device is lost (fell off the bus) or its handle could not be obtained.
    Failed,
}

/// Current clock frequencies in hertz.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Clocks {
    /// Graphics clock.
    pub graphics_hz: Option<u64>,
    /// Streaming multiprocessor clock.
    pub sm_hz: Option<u64>,
    /// Memory clock.
    pub memory_hz: Option<u64>,
    /// Video clock.
    pub video_hz: Option<u64>,
}

/// NVML's GPM (GPU Performance Monitoring) metrics of a GPU or a MIG instance over the last
/// poll interval (Hopper and later): ratios 0–1 and bytes per second. `None`: not reported.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct GpmMetrics {
    /// Fraction of time each SM had a warp assigned, averaged over the SMs (DCGM `SM_ACTIVE`).
    pub sm_active: Option<f64>,
    /// Resident warps as a fraction of the maximum (DCGM `SM_OCCUPANCY`).
    pub sm_occupancy: Option<f64>,
    /// Any tensor pipe active (DCGM `PIPE_TENSOR_ACTIVE`).
    pub tensor_active: Option<f64>,
    /// FP64 tensor (DFMA) pipe active.
    pub tensor_dfma_active: Option<f64>,
    /// FP16 / BF16 tensor (HMMA) pipe active.
    pub tensor_hmma_active: Option<f64>,
    /// Integer tensor (IMMA) pipe active.
    pub tensor_imma_active: Option<f64>,
    /// DRAM bandwidth used, fraction of the maximum (DCGM `DRAM_ACTIVE`).
    pub dram_active: Option<f64>,
    /// Non-tensor FP16 pipe active.
    pub fp16_active: Option<f64>,
    /// Non-tensor FP32 pipe active.
    pub fp32_active: Option<f64>,
    /// Non-tensor FP64 pipe active.
    pub fp64_active: Option<f64>,
    /// PCIe bytes per second sent by the GPU.
    pub pcie_tx_bytes_per_second: Option<f64>,
    /// PCIe bytes per second received by the GPU.
    pub pcie_rx_bytes_per_second: Option<f64>,
    /// NVLink bytes per second sent, all links.
    pub nvlink_tx_bytes_per_second: Option<f64>,
    /// NVLink bytes per second received, all links.
    pub nvlink_rx_bytes_per_second: Option<f64>,
}

/// One MIG instance of a GPU in one poll.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MigInstanceSample {
    /// The MIG device's UUID (`MIG-…`), its `hw.gpu.mig.id`.
    pub id: Arc<str>,
    /// The GPU instance id NVML numbers it by, when known.
    pub gpu_instance_id: Option<u32>,
    /// Memory in use in this instance, bytes.
    pub memory_used_bytes: Option<u64>,
    /// Memory of this instance, bytes.
    pub memory_total_bytes: Option<u64>,
    /// GPM metrics of this instance, when the GPU gives them.
    pub gpm: Option<GpmMetrics>,
}

impl MigInstanceSample {
    /// An instance `id` with nothing reported yet.
    pub fn new(id: Arc<str>, gpu_instance_id: Option<u32>) -> Self {
        Self { id, gpu_instance_id, memory_used_bytes: None, memory_total_bytes: None, gpm: None }
    }
}

/// One process's use of a GPU in one poll: this process, and with the process-memory option
/// each of its descendants that has a context on the GPU.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ProcessSample {
    /// The process id as NVML reports it (the host's).
    pub pid: u32,
    /// Memory the process uses on the GPU, bytes (NVML's running-process lists).
    pub memory_used_bytes: Option<u64>,
    /// SM utilisation by the process over the poll interval, ratio 0–1 (0 when NVML had no
    /// sample of it: it lists only processes that did something).
    pub sm_utilization: Option<f64>,
    /// Memory-controller utilisation by the process, ratio 0–1.
    pub memory_bandwidth_utilization: Option<f64>,
    /// Encoder utilisation by the process, ratio 0–1.
    pub encoder_utilization: Option<f64>,
    /// Decoder utilisation by the process, ratio 0–1.
    pub decoder_utilization: Option<f64>,
}

impl ProcessSample {
    /// Process `pid` with nothing reported yet.
    pub fn new(pid: u32) -> Self {
        Self {
            pid,
            memory_used_bytes: None,
            sm_utilization: None,
            memory_bandwidth_utilization: None,
            encoder_utilization: None,
            decoder_utilization: None,
        }
    }
}

/// One device in one poll. `None` means "not reported", never zero.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DeviceSample {
    /// Identity, shared by all samples of the device.
    pub info: Arc<DeviceInfo>,
    /// Whether the device answered; when [`DeviceStatus::Failed`] every value is `None`.
    pub status: DeviceStatus,
    /// General engine utilisation, ratio 0–1. Absent on MIG-enabled devices.
    pub utilization: Option<f64>,
    /// Encoder utilisation, ratio 0–1.
    pub encoder_utilization: Option<f64>,
    /// Decoder utilisation, ratio 0–1.
    pub decoder_utilization: Option<f64>,
    /// Memory in use, bytes.
    pub memory_used_bytes: Option<u64>,
    /// Memory installed, bytes.
    pub memory_total_bytes: Option<u64>,
    /// Power draw, watts.
    pub power_watts: Option<f64>,
    /// Energy since driver load, joules.
    pub energy_joules: Option<f64>,
    /// Core temperature, degrees Celsius.
    pub temperature_celsius: Option<f64>,
    /// Corrected ECC errors (aggregate counter).
    pub ecc_corrected: Option<u64>,
    /// Uncorrected ECC errors (aggregate counter).
    pub ecc_uncorrected: Option<u64>,
    /// Current clocks.
    pub clocks: Clocks,
    /// `(fan index, speed ratio 0–1)` for every fan that reported.
    pub fan_speeds: Vec<(u32, f64)>,
    /// PCIe bytes per second sent by the device (opt-in).
    pub pcie_tx_bytes_per_second: Option<f64>,
    /// PCIe bytes per second received by the device (opt-in).
    pub pcie_rx_bytes_per_second: Option<f64>,
    /// Memory on this device used by this process and its descendants, bytes (opt-in).
    pub process_memory_bytes: Option<u64>,
    /// Fraction of time device memory was read or written (bandwidth), ratio 0–1.
    pub memory_bandwidth_utilization: Option<f64>,
    /// Enforced power limit, watts.
    pub power_limit_watts: Option<f64>,
    /// Every clock throttle reason the device supports, with whether it is active now.
    pub throttle_reasons: Vec<(&'static str, bool)>,
    /// Row remapping state.
    pub remapped_rows: Option<RemappedRows>,
    /// Page retirement state.
    pub retired_pages: RetiredPages,
    /// `(XID code, events)` seen since the source opened, by code.
    pub xid_errors: Vec<(u64, u64)>,
    /// Energy since driver load as NVML counts it, millijoules (exact; [`Self::energy_joules`]
    /// is the same in joules).
    pub energy_millijoules: Option<u64>,
    /// GPM metrics of the whole GPU over the last poll interval (Hopper and later; absent on
    /// the first poll, which only takes the first sample).
    pub gpm: Option<GpmMetrics>,
    /// The GPU's MIG instances, when MIG is on.
    pub mig_instances: Vec<MigInstanceSample>,
    /// This process's (and, opted in, its descendants') use of the GPU, one entry per process
    /// with a context on it.
    pub processes: Vec<ProcessSample>,
}

impl DeviceSample {
    /// A sample of `info` with status [`DeviceStatus::Ok`] and nothing reported yet.
    pub fn new(info: Arc<DeviceInfo>) -> Self {
        Self {
            info,
            status: DeviceStatus::Ok,
            utilization: None,
            encoder_utilization: None,
            decoder_utilization: None,
            memory_used_bytes: None,
            memory_total_bytes: None,
            power_watts: None,
            energy_joules: None,
            temperature_celsius: None,
            ecc_corrected: None,
            ecc_uncorrected: None,
            clocks: Clocks::default(),
            fan_speeds: Vec::new(),
            pcie_tx_bytes_per_second: None,
            pcie_rx_bytes_per_second: None,
            process_memory_bytes: None,
            memory_bandwidth_utilization: None,
            power_limit_watts: None,
            throttle_reasons: Vec::new(),
            remapped_rows: None,
            retired_pages: RetiredPages::default(),
            xid_errors: Vec::new(),
            energy_millijoules: None,
            gpm: None,
            mig_instances: Vec::new(),
            processes: Vec::new(),
        }
    }

    /// A sample of a device that did not answer: status failed, no values.
    pub fn failed(info: Arc<DeviceInfo>) -> Self {
        let mut s = Self::new(info);
        s.status = DeviceStatus::Failed;
        s
    }

    /// Used / total memory, when both are known and total is not zero.
    pub fn memory_utilization(&self) -> Option<f64> {
        match (self.memory_used_bytes, self.memory_total_bytes) {
            (Some(used), Some(total)) if total > 0 => Some(used as f64 / total as f64),
            _ => None,
        }
    }
}
