//! [`DeviceReading`]: the latest poll of each GPU reduced to what attributing GPU use to a
//! stage or shard needs, for callers outside the metric callbacks.

use std::time::SystemTime;

use crate::poller::SampleReader;
use crate::source::{DeviceStatus, GpuSample};

/// What one GPU reported in the latest poll, for this process. Values are `None` when the
/// GPU does not report them (never a zero standing in for "unknown").
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DeviceReading {
    /// The driver's index of the GPU (`hw.gpu.index`).
    pub index: u32,
    /// The GPU's `hw.id` (its UUID).
    pub id: String,
    /// When the poll started.
    pub taken_at: SystemTime,
    /// Whether this process has a context on the GPU (it is in NVML's running-process lists
    /// or has a utilisation sample there).
    pub used_by_this_process: bool,
    /// Fraction of time a kernel ran, 0–1 (NVML's `utilization.gpu`).
    pub utilization: Option<f64>,
    /// GPM SM activity over the last poll interval, 0–1 (Hopper and later).
    pub sm_active: Option<f64>,
    /// GPM tensor activity (any tensor pipe) over the last poll interval, 0–1.
    pub tensor_active: Option<f64>,
    /// Memory in use on the GPU by every process, bytes.
    pub memory_used_bytes: Option<u64>,
    /// Memory in use on the GPU by this process (its own pid), bytes.
    pub process_memory_bytes: Option<u64>,
    /// SM utilisation of the GPU by this process over the poll interval, 0–1.
    pub process_sm_utilization: Option<f64>,
    /// The GPU's energy counter since the driver loaded, millijoules: the delta between two
    /// readings is the energy of the interval.
    pub energy_millijoules: Option<u64>,
    /// Power draw, watts.
    pub power_watts: Option<f64>,
}

impl GpuSample {
    /// One [`DeviceReading`] per answering GPU of this sample, in index order, seen from this
    /// process (`std::process::id()`).
    pub fn readings(&self) -> Vec<DeviceReading> {
        let me = std::process::id();
        self.devices
            .iter()
            .filter(|d| d.status == DeviceStatus::Ok)
            .map(|d| {
                let mine = d.processes.iter().find(|p| p.pid == me);
                DeviceReading {
                    index: d.info.index,
                    id: d.info.id.clone(),
                    taken_at: self.taken_at,
                    used_by_this_process: mine.is_some(),
                    utilization: d.utilization,
                    sm_active: d.gpm.and_then(|g| g.sm_active),
                    tensor_active: d.gpm.and_then(|g| g.tensor_active),
                    memory_used_bytes: d.memory_used_bytes,
                    process_memory_bytes: mine.and_then(|p| p.memory_used_bytes),
                    process_sm_utilization: mine.and_then(|p| p.sm_utilization),
                    energy_millijoules: d.energy_millijoules,
                    power_watts: d.power_watts,
                }
            })
            .collect()
    }
}

impl SampleReader {
    /// [`GpuSample::readings`] of the latest sample; empty before the first poll and when GPU
    /// telemetry is off.
    pub fn readings(&self) -> Vec<DeviceReading> {
        self.latest().map(|s| s.readings()).unwrap_or_default()
    }
}
