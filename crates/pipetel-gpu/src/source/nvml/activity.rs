//! What NVML says a GPU did, beyond `nvidia-smi`'s gauges: GPM activity (Hopper and later) of
//! the GPU and of each MIG instance, the MIG instances' memory, and this process's use (its
//! memory and its SM, memory-controller, encoder and decoder utilisation).
//!
//! GPM needs two samples: each poll takes one per GPU (and per MIG instance) and computes the
//! metrics over the interval since the previous poll's, so the first poll reports none. A GPU
//! without GPM (older than Hopper, or a driver without the GPM functions) reports no GPM
//! series at all, and one info line at open says why.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::field::Field;
use super::library::{self, GpmAnswer, Library};
use crate::source::policy::{ErrorClass, Poll, ReadError};
use crate::source::{GpmMetrics, MigInstanceSample, ProcessSample};

/// NVML reports GPM rates in MiB per second.
const MIB: f64 = 1024.0 * 1024.0;

/// The GPM metrics asked for, in the order of [`GpmMetrics`].
pub(super) const GPM_METRICS: [GpmMetricId; 14] = [
    GpmMetricId::SmUtil,
    GpmMetricId::SmOccupancy,
    GpmMetricId::AnyTensorUtil,
    GpmMetricId::DfmaTensorUtil,
    GpmMetricId::HmmaTensorUtil,
    GpmMetricId::ImmaTensorUtil,
    GpmMetricId::DramBwUtil,
    GpmMetricId::Fp16Util,
    GpmMetricId::Fp32Util,
    GpmMetricId::Fp64Util,
    GpmMetricId::PcieTxPerSec,
    GpmMetricId::PcieRxPerSec,
    GpmMetricId::NvlinkTotalTxPerSec,
    GpmMetricId::NvlinkTotalRxPerSec,
];

/// One MIG instance as found when the source opened.
#[derive(Debug)]
pub(super) struct MigState {
    /// The MIG device's slot on its GPU (`nvmlDeviceGetMigDeviceHandleByIndex`).
    slot: u32,
    id: Arc<str>,
    gpu_instance: Option<u32>,
    /// The GPM metrics this instance still answers.
    gpm_metrics: Vec<GpmMetricId>,
}

/// Per device: whether GPM runs, and the metrics the device still answers.
#[derive(Debug, Default)]
pub(super) struct GpmState {
    /// GPM metrics of the whole GPU still asked; empty when GPM is off.
    metrics: Vec<GpmMetricId>,
    /// Whether the GPU gives GPM at all.
    on: bool,
}

/// Per device: the MIG instances, GPM, and the last process-utilisation sample seen.
#[derive(Debug, Default)]
pub(super) struct Activity {
    pub(super) gpm: GpmState,
    pub(super) mig: Vec<MigState>,
    /// NVML's timestamp (µs) of the newest process-utilisation sample read so far.
    last_process_sample: u64,
}

/// Why a device gives no GPM, or `None` when it does.
fn gpm_off_reason(device: &Device<'_>) -> Option<String> {
    match device.gpm_support() {
        Ok(true) => None,
        Ok(false) => Some("the GPU does not support GPM (Hopper or later needed)".into()),
        Err(NvmlError::FailedToLoadSymbol(_) | NvmlError::FunctionNotFound) => {
            Some("the NVML library has no GPM functions (driver 520 or later needed)".into())
        }
        Err(e) => Some(format!("nvmlGpmQueryDeviceSupport failed: {e}")),
    }
}

/// The activity state of an answering device, found at open: its GPM support (its reason
/// when off goes into `off`, for the one log line) and its MIG instances.
/// `mig_named` limits the MIG instances to those UUIDs (empty: all).
pub(super) fn open(
    nvml: &Nvml,
    device: &Device<'_>,
    index: u32,
    mig: bool,
    mig_named: &[String],
    off: &mut Vec<(u32, String)>,
) -> Activity {
    let on = match gpm_off_reason(device) {
        None => true,
        Some(reason) => {
            off.push((index, reason));
            false
        }
    };
    let gpm = GpmState { metrics: if on { GPM_METRICS.to_vec() } else { Vec::new() }, on };
    let mut mig = if mig { mig_instances(nvml, device, on) } else { Vec::new() };
    if !mig_named.is_empty() {
        mig.retain(|m| mig_named.iter().any(|n| n.eq_ignore_ascii_case(&m.id)));
    }
    Activity { gpm, mig, last_process_sample: 0 }
}

/// Logs, once, which GPUs give no GPM series and why (one line per reason).
pub(super) fn log_gpm_off(off: &[(u32, String)]) {
    let mut by_reason: Vec<(&str, Vec<u32>)> = Vec::new();
    for (index, reason) in off {
        match by_reason.iter_mut().find(|(r, _)| r == reason) {
            Some((_, indices)) => indices.push(*index),
            None => by_reason.push((reason, vec![*index])),
        }
    }
    for (reason, indices) in by_reason {
        let list: Vec<String> = indices.iter().map(u32::to_string).collect();
        tracing::info!(
            gpu.devices = ?indices,
            "GPM metrics (SM, tensor, FP pipe and DRAM activity, NVLink) off for GPU {}: {reason}",
            list.join(", ")
        );
    }
}

fn mig_instances(nvml: &Nvml, device: &Device<'_>, gpm: bool) -> Vec<MigState> {
    let slots = device.mig_device_count().unwrap_or(0);
    // Empty slots answer NotFound: skip them.
    (0..slots)
        .filter_map(|slot| {
            let mig = device.mig_device_by_index(slot).ok()?;
            let id: Arc<str> = mig.uuid().ok()?.into();
            let gpu_instance = library::gpu_instance_id(nvml, &mig).ok();
            let gpm_metrics = if gpm && gpu_instance.is_some() { GPM_METRICS.to_vec() } else { Vec::new() };
            Some(MigState { slot, id, gpu_instance, gpm_metrics })
        })
        .collect()
}

/// GPM of the whole GPU over the last interval.
pub(super) fn read_gpm(library: &Library, index: u32, state: &mut Activity, p: &mut Poll<'_>) -> Option<GpmMetrics> {
    let gpm = &mut state.gpm;
    if !gpm.on || gpm.metrics.is_empty() {
        return None;
    }
    let answers = p.read(Field::Gpm, || library.gpm_interval(index, None, &gpm.metrics))??;
    Some(collect(index, None, &mut gpm.metrics, answers))
}

/// Memory and GPM of each MIG instance.
pub(super) fn read_mig(
    library: &Library,
    device: &Device<'_>,
    index: u32,
    state: &mut Activity,
    p: &mut Poll<'_>,
) -> Vec<MigInstanceSample> {
    let mut out = Vec::with_capacity(state.mig.len());
    for mig in &mut state.mig {
        let mut sample = MigInstanceSample::new(Arc::clone(&mig.id), mig.gpu_instance);
        if p.wants(Field::MigMemory) {
            let memory = p.read(Field::MigMemory, || device.mig_device_by_index(mig.slot)?.memory_info());
            if let Some(m) = memory {
                sample.memory_used_bytes = Some(m.used);
                sample.memory_total_bytes = Some(m.total);
            }
        }
        if let (Some(gi), false) = (mig.gpu_instance, mig.gpm_metrics.is_empty()) {
            let answers = p.read(Field::GpmMig, || library.gpm_interval(index, Some(gi), &mig.gpm_metrics)).flatten();
            sample.gpm = answers.map(|a| collect(index, Some(&mig.id), &mut mig.gpm_metrics, a));
        }
        out.push(sample);
    }
    out
}

/// The metrics of one interval; a metric the GPU cannot give is not asked again.
fn collect(index: u32, mig: Option<&str>, asked: &mut Vec<GpmMetricId>, answers: Vec<GpmAnswer>) -> GpmMetrics {
    let mut m = GpmMetrics::default();
    let mut dropped = Vec::new();
    for (id, answer) in asked.iter().zip(answers) {
        match answer {
            Ok(r) => set(&mut m, *id, r.value),
            Err(e) if e.class() == ErrorClass::Unsupported => {
                tracing::debug!(gpu.index = index, gpu.mig = mig, metric = ?id, error = %e,
                    "GPM metric not available; no longer read");
                dropped.push(*id);
            }
            Err(e) => tracing::debug!(gpu.index = index, gpu.mig = mig, metric = ?id, error = %e, "GPM metric failed"),
        }
    }
    asked.retain(|id| !dropped.contains(id));
    m
}

/// Stores NVML's `value` of metric `id`: percent as a ratio, MiB/s as bytes/s.
fn set(m: &mut GpmMetrics, id: GpmMetricId, value: f64) {
    let ratio = Some(value / 100.0);
    let rate = Some(value * MIB);
    match id {
        GpmMetricId::SmUtil => m.sm_active = ratio,
        GpmMetricId::SmOccupancy => m.sm_occupancy = ratio,
        GpmMetricId::AnyTensorUtil => m.tensor_active = ratio,
        GpmMetricId::DfmaTensorUtil => m.tensor_dfma_active = ratio,
        GpmMetricId::HmmaTensorUtil => m.tensor_hmma_active = ratio,
        GpmMetricId::ImmaTensorUtil => m.tensor_imma_active = ratio,
        GpmMetricId::DramBwUtil => m.dram_active = ratio,
        GpmMetricId::Fp16Util => m.fp16_active = ratio,
        GpmMetricId::Fp32Util => m.fp32_active = ratio,
        GpmMetricId::Fp64Util => m.fp64_active = ratio,
        GpmMetricId::PcieTxPerSec => m.pcie_tx_bytes_per_second = rate,
        GpmMetricId::PcieRxPerSec => m.pcie_rx_bytes_per_second = rate,
        GpmMetricId::NvlinkTotalTxPerSec => m.nvlink_tx_bytes_per_second = rate,
        GpmMetricId::NvlinkTotalRxPerSec => m.nvlink_rx_bytes_per_second = rate,
        _ => {}
    }
}

/// The use of the device by each process of `pids` that has a context on it: memory from the
/// running-process lists, utilisation averaged over NVML's samples since the last poll (0 for
/// a listed process without samples: NVML lists only processes that did something).
pub(super) fn read_processes(
    device: &Device<'_>,
    state: &mut Activity,
    p: &mut Poll<'_>,
    pids: &HashSet<u32>,
) -> Vec<ProcessSample> {
    let compute = p.read(Field::ComputeProcesses, || device.running_compute_processes());
    let graphics = p.read(Field::GraphicsProcesses, || device.running_graphics_processes());
    let mut found: HashMap<u32, ProcessSample> = HashMap::new();
    for info in compute.into_iter().chain(graphics).flatten().filter(|i| pids.contains(&i.pid)) {
        let entry = found.entry(info.pid).or_insert_with(|| ProcessSample::new(info.pid));
        // A process with both contexts appears in both lists with the same memory: once.
        if let UsedGpuMemory::Used(bytes) = info.used_gpu_memory {
            entry.memory_used_bytes = Some(entry.memory_used_bytes.unwrap_or(0).max(bytes));
        }
    }
    let last = state.last_process_sample;
    // NotFound: no process had a sample since `last`.
    let samples = p.read(Field::ProcessUtilization, || match device.process_utilization_stats(last) {
        Err(NvmlError::NotFound) => Ok(Vec::new()),
        other => other,
    });
    if let Some(samples) = samples {
        // (sm, mem, enc, dec) sums and the number of samples, per pid.
        let mut sums: HashMap<u32, ([u64; 4], u64)> = HashMap::new();
        for s in samples.iter().filter(|s| s.timestamp > last) {
            state.last_process_sample = state.last_process_sample.max(s.timestamp);
            if pids.contains(&s.pid) {
                let (sum, n) = sums.entry(s.pid).or_default();
                for (acc, v) in sum.iter_mut().zip([s.sm_util, s.mem_util, s.enc_util, s.dec_util]) {
                    *acc += u64::from(v);
                }
                *n += 1;
            }
        }
        for pid in sums.keys() {
            found.entry(*pid).or_insert_with(|| ProcessSample::new(*pid));
        }
        for (pid, entry) in &mut found {
            let mean = |i: usize| sums.get(pid).map_or(0.0, |(s, n)| s[i] as f64 / *n as f64 / 100.0);
            entry.sm_utilization = Some(mean(0));
            entry.memory_bandwidth_utilization = Some(mean(1));
            entry.encoder_utilization = Some(mean(2));
            entry.decoder_utilization = Some(mean(3));
        }
    }
    let mut processes: Vec<ProcessSample> = found.into_values().collect();
    processes.sort_by_key(|s| s.pid);
    processes
}
