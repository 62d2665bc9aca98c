//! The GPU poller's readings as the core's [`GpuUse`]: what this process did on its GPUs since
//! the previous read, for the sampler to attribute to the running shards
//! ([`pipetel_core::pipeline::gpu`]).
//!
//! Per GPU this process uses (it holds memory or has a utilisation sample there):
//! - busy: this process's SM utilisation over the poll interval (NVML's process utilisation);
//!   where the driver gives none, the GPU's utilisation when this process is on it;
//! - activity: the GPU's GPM SM and tensor activity (Hopper and later), averaged over the GPUs;
//! - memory: this process's memory on the GPU;
//! - energy: the GPU's energy counter's delta since the previous read, times this process's
//!   share of the GPU's utilisation (its SM utilisation over the GPU's, at most 1; all of it when
//!   the driver gives no per-process figure or the GPU was idle).

use std::collections::HashMap;

use pipetel_core::pipeline::gpu::GpuUse;
use pipetel_gpu::{DeviceReading, SampleReader};

/// A reader for [`pipetel_core::pipeline::gpu::set_gpu_reader`] over the poller's latest sample.
pub(crate) fn reader(samples: SampleReader) -> pipetel_core::pipeline::gpu::GpuReader {
    let mut energy: HashMap<String, u64> = HashMap::new();
    Box::new(move || use_since(&samples.readings(), &mut energy))
}

/// This process's use of the GPUs in `readings`; `energy` holds each GPU's counter at the
/// previous read. `None` when this process uses none of them.
pub(crate) fn use_since(readings: &[DeviceReading], energy: &mut HashMap<String, u64>) -> Option<GpuUse> {
    let mine: Vec<&DeviceReading> =
        readings.iter().filter(|r| r.used_by_this_process || r.process_memory_bytes.is_some_and(|m| m > 0)).collect();
    let mut used = GpuUse::default();
    let (mut sm, mut tensor) = (Vec::new(), Vec::new());
    for r in &mine {
        let busy = r.process_sm_utilization.or(r.utilization).unwrap_or(0.0);
        used.busy += busy;
        used.memory_bytes += r.process_memory_bytes.unwrap_or(0);
        sm.extend(r.sm_active);
        tensor.extend(r.tensor_active);
        if let Some(now) = r.energy_millijoules {
            let before = energy.insert(r.id.clone(), now);
            let delta = before.map(|b| now.saturating_sub(b)).unwrap_or(0) as f64 / 1000.0;
            let share = match (r.process_sm_utilization, r.utilization) {
                (Some(p), Some(all)) if all > 0.0 => (p / all).min(1.0),
                // No figure to share by (or an idle GPU): the energy goes to the process on it.
                _ => 1.0,
            };
            used.energy_joules += delta * share;
        }
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    used.sm_active = mean(&sm);
    used.tensor_active = mean(&tensor);
    (!mine.is_empty()).then_some(used)
}
