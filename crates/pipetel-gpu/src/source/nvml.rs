//! [`NvmlSource`]: the [`GpuSource`] for NVIDIA GPUs, on `nvml-wrapper`.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, RetirementCause, TemperatureSensor,
};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::policy::{DevicePolicy, ErrorClass, PartRead, Poll, ReadError};
use crate::devices::{Candidate, DeviceFilter, DeviceSelection};
use crate::error::GpuError;
use crate::names;
use crate::process;
use crate::source::{DeviceInfo, DeviceSample, GpuSample, GpuSource, RemappedRows};

mod activity;
mod field;
mod library;
use field::Field;
use library::Library;

/// The throttle reasons reported, NVML's flag and its [`names::throttle`] value.
const THROTTLE_REASONS: [(ThrottleReasons, &str); 9] = [
    (ThrottleReasons::GPU_IDLE, names::throttle::GPU_IDLE),
    (ThrottleReasons::APPLICATIONS_CLOCKS_SETTING, names::throttle::APPLICATIONS_CLOCKS_SETTING),
    (ThrottleReasons::SW_POWER_CAP, names::throttle::SW_POWER_CAP),
    (ThrottleReasons::HW_SLOWDOWN, names::throttle::HW_SLOWDOWN),
    (ThrottleReasons::SYNC_BOOST, names::throttle::SYNC_BOOST),
    (ThrottleReasons::SW_THERMAL_SLOWDOWN, names::throttle::SW_THERMAL_SLOWDOWN),
    (ThrottleReasons::HW_THERMAL_SLOWDOWN, names::throttle::HW_THERMAL_SLOWDOWN),
    (ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN, names::throttle::HW_POWER_BRAKE_SLOWDOWN),
    (ThrottleReasons::DISPLAY_CLOCK_SETTING, names::throttle::DISPLAY_CLOCK_SETTING),
];

/// The library name NVML is loaded by when no path is configured.
pub const DEFAULT_NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// NVML's value for "MIG enabled" in `nvmlDeviceGetMigMode`.
const MIG_ENABLED: u32 = 1;

/// Opt-in reads of [`NvmlSource`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NvmlOptions {
    /// Read PCIe throughput (blocks about 20 ms per direction and device).
    pub pcie_throughput: bool,
    /// Read the GPU use of this process's descendants too (this process's own is always read).
    pub process_memory: bool,
}

impl NvmlOptions {
    /// Options with both opt-in reads set as given.
    pub fn new(pcie_throughput: bool, process_memory: bool) -> Self {
        Self { pcie_throughput, process_memory }
    }
}

/// The one rule every NVML read (fans included) follows.
impl ReadError for NvmlError {
    fn class(&self) -> ErrorClass {
        match self {
            // Permanent for this device and driver.
            Self::NotSupported | Self::NoPermission | Self::FailedToLoadSymbol(_) | Self::FunctionNotFound => {
                ErrorClass::Unsupported
            }
            Self::GpuLost => ErrorClass::Lost,
            _ => ErrorClass::Transient,
        }
    }
}

/// What the source remembers about one device between polls.
#[derive(Debug)]
struct DeviceState {
    info: Arc<DeviceInfo>,
    /// MIG-enabled devices have no device-level utilisation; it is reported as absent.
    mig: bool,
    /// Fans still read; a fan that cannot report its speed is dropped for good.
    fans: Vec<u32>,
    /// The throttle reasons the device supports (every known one when it cannot say).
    throttle_reasons: Vec<(ThrottleReasons, &'static str)>,
    /// XID events seen so far, by code; `None` when the device cannot deliver them.
    xids: Option<std::collections::BTreeMap<u64, u64>>,
    /// GPM, MIG instances and process utilisation state.
    activity: activity::Activity,
    policy: DevicePolicy,
}

/// A [`GpuSource`] reading NVIDIA GPUs through NVML.
///
/// Open it on the thread that will poll it ([`crate::GpuPoller`] does): `nvmlInit` can take
/// seconds without persistence mode and some drivers hang in it.
#[derive(Debug)]
pub struct NvmlSource {
    library: Library,
    devices: Vec<DeviceState>,
    options: NvmlOptions,
    /// Whether a failed event read was already warned about.
    events_warned: bool,
}

impl NvmlSource {
    /// Loads NVML from `library` (default [`DEFAULT_NVML_LIBRARY`] from the loader's search
    /// path), initialises it and reads each device's identity; every device is kept.
    ///
    /// # Errors
    ///
    /// [`GpuError::LibraryNotLoaded`] when the file cannot be loaded or is not NVML,
    /// [`GpuError::InitFailed`] when NVML refuses to initialise (driver not loaded, no
    /// permission, …) or cannot count devices, [`GpuError::NoDevice`] when it finds none.
    pub fn open(library: Option<&Path>, options: NvmlOptions) -> Result<Self, GpuError> {
        let all = DeviceSelection::All.resolve(|_| None)?;
        Self::open_filtered(library, options, &all)
    }

    /// As [`NvmlSource::open`], keeping only the devices `filter` selects (logged once, with
    /// the setting that chose them), and registering for XID error events on each.
    ///
    /// # Errors
    ///
    /// As [`NvmlSource::open`]; also [`GpuError::NoVisibleDevice`] when the filter keeps no
    /// device and [`GpuError::UnknownDevice`] when `PIPETEL_GPU_DEVICES` names one NVML does
    /// not have.
    pub fn open_filtered(
        library: Option<&Path>,
        options: NvmlOptions,
        filter: &DeviceFilter,
    ) -> Result<Self, GpuError> {
        let library_name = library.map_or_else(|| DEFAULT_NVML_LIBRARY.to_owned(), |p| p.display().to_string());
        let mut builder = Nvml::builder();
        if let Some(path) = library {
            builder.lib_path(path.as_os_str());
        } else {
            builder.lib_path(OsStr::new(DEFAULT_NVML_LIBRARY));
        }
        let nvml = builder.init().map_err(|e| match e {
            NvmlError::LibloadingError(err) => {
                GpuError::LibraryNotLoaded { library: library_name.clone(), reason: err.to_string() }
            }
            NvmlError::FailedToLoadSymbol(reason) => GpuError::LibraryNotLoaded {
                library: library_name.clone(),
                reason: format!("not an NVML library: {reason}"),
            },
            other => GpuError::InitFailed { library: library_name.clone(), reason: other.to_string() },
        })?;
        let count = nvml.device_count().map_err(|e| GpuError::InitFailed {
            library: library_name.clone(),
            reason: format!("cannot count devices: {e}"),
        })?;
        if count == 0 {
            return Err(GpuError::NoDevice { library: library_name });
        }
        let kept = select_devices(&nvml, count, filter, &library_name)?;
        let driver = nvml.sys_driver_version().ok();
        // 12040 means 12.4.
        let cuda = nvml.sys_cuda_driver_version().ok().map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
        let mut gpm_off = Vec::new();
        let mut devices: Vec<DeviceState> = kept
            .iter()
            .map(|(i, mig)| open_device(&nvml, *i, mig, driver.clone(), cuda.clone(), &mut gpm_off))
            .collect();
        activity::log_gpm_off(&gpm_off);
        let mut library = Library::new(nvml);
        let answering: Vec<u32> = devices.iter().filter(|d| !d.policy.is_failed()).map(|d| d.info.index).collect();
        let registered = library.register_xid_events(&answering);
        for d in &mut devices {
            if registered.contains(&d.info.index) {
                d.xids = Some(std::collections::BTreeMap::new());
            }
        }
        Ok(Self { library, devices, options, events_warned: false })
    }

    /// Identities of the devices found when the source opened.
    pub fn devices(&self) -> impl Iterator<Item = &Arc<DeviceInfo>> {
        self.devices.iter().map(|d| &d.info)
    }
}

/// The indices of the devices `filter` keeps, each with the MIG devices it names of it (empty:
/// all), logged once with the reason.
fn select_devices(
    nvml: &Nvml,
    count: u32,
    filter: &DeviceFilter,
    library: &str,
) -> Result<Vec<(u32, Vec<String>)>, GpuError> {
    let kept: Vec<(u32, Vec<String>)> = if filter.is_all() {
        (0..count).map(|i| (i, Vec::new())).collect()
    } else {
        // A device whose handle fails still counts by index; its UUID is then unknown.
        let ids: Vec<(u32, String, Vec<String>)> = (0..count)
            .map(|i| match nvml.device_by_index(i) {
                Ok(d) => (i, d.uuid().unwrap_or_default(), mig_uuids(&d)),
                Err(_) => (i, String::new(), Vec::new()),
            })
            .collect();
        let candidates: Vec<Candidate<'_>> =
            ids.iter().map(|(index, uuid, mig)| Candidate { index: *index, uuid, mig }).collect();
        let indices = filter.select(&candidates).map_err(|u| GpuError::UnknownDevice {
            setting: u.setting,
            entry: u.entry,
            library: library.to_owned(),
        })?;
        indices
            .into_iter()
            .map(|i| {
                let mig = candidates.iter().find(|c| c.index == i).map(|c| filter.named_mig(c)).unwrap_or_default();
                (i, mig)
            })
            .collect()
    };
    if kept.is_empty() {
        return Err(GpuError::NoVisibleDevice { reason: filter.reason() });
    }
    let indices: Vec<u32> = kept.iter().map(|(i, _)| *i).collect();
    tracing::info!(
        gpu.devices = ?indices,
        gpu.found = count,
        "GPU devices reported: {} of {count} ({})",
        kept.len(),
        filter.reason()
    );
    Ok(kept)
}

/// UUIDs of the MIG devices of `device` (empty when MIG is off or not supported).
fn mig_uuids(device: &Device<'_>) -> Vec<String> {
    if !device.mig_mode().is_ok_and(|m| m.current == MIG_ENABLED) {
        return Vec::new();
    }
    let slots = device.mig_device_count().unwrap_or(0);
    // Empty slots answer NotFound: skip them.
    (0..slots).filter_map(|i| device.mig_device_by_index(i).ok()?.uuid().ok()).collect()
}

fn open_device(
    nvml: &Nvml,
    index: u32,
    mig_named: &[String],
    driver: Option<String>,
    cuda: Option<String>,
    gpm_off: &mut Vec<(u32, String)>,
) -> DeviceState {
    let fallback_id = format!("{}-gpu-{index}", names::VENDOR_NVIDIA);
    let device = match nvml.device_by_index(index) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(gpu.index = index, error = %e, "GPU does not answer; reporting it as failed");
            let info =
                DeviceInfo::new(index, fallback_id, String::new(), names::VENDOR_NVIDIA).with_versions(driver, cuda);
            return DeviceState {
                info: Arc::new(info),
                mig: false,
                fans: Vec::new(),
                throttle_reasons: Vec::new(),
                xids: None,
                activity: activity::Activity::default(),
                policy: DevicePolicy::failed(),
            };
        }
    };
    let id = device.uuid().unwrap_or(fallback_id);
    let name = device.name().unwrap_or_default();
    // Errors here mean "no MIG support", the common case on consumer and older GPUs.
    let mig = device.mig_mode().is_ok_and(|m| m.current == MIG_ENABLED);
    let fans = device.num_fans().map(|n| (0..n).collect()).unwrap_or_default();
    if mig {
        tracing::debug!(gpu.index = index, "MIG enabled: device utilisation is not reported");
    }
    // A device that cannot say which reasons it supports is asked about every known one.
    let supported = device.supported_throttle_reasons().unwrap_or(ThrottleReasons::all());
    let throttle_reasons = THROTTLE_REASONS.into_iter().filter(|(flag, _)| supported.contains(*flag)).collect();
    let activity = activity::open(nvml, &device, index, mig, mig_named, gpm_off);
    DeviceState {
        info: Arc::new(DeviceInfo::new(index, id, name, names::VENDOR_NVIDIA).with_versions(driver, cuda)),
        mig,
        fans,
        throttle_reasons,
        xids: None,
        activity,
        policy: DevicePolicy::answering(),
    }
}

impl GpuSource for NvmlSource {
    fn platform(&self) -> &'static str {
        names::VENDOR_NVIDIA
    }

    fn sample(&mut self) -> Result<GpuSample, GpuError> {
        let pids = if self.options.process_memory {
            process::self_and_descendants()
        } else {
            HashSet::from([std::process::id()])
        };
        self.count_xid_events();
        let Self { library, devices, options, .. } = self;
        let samples = devices.iter_mut().map(|state| sample_device(library, state, *options, &pids)).collect();
        Ok(GpuSample::new(samples))
    }
}

impl NvmlSource {
    /// Counts the XID events NVML queued since the last poll. Never waits: the queue is read
    /// with a zero timeout until it is empty, so a poll takes no longer for it.
    fn count_xid_events(&mut self) {
        let (events, error) = self.library.drain_xid_events();
        for (index, code) in events {
            tracing::warn!(gpu.index = index, gpu.xid = code, "GPU XID error");
            let counts = self.devices.iter_mut().find(|d| d.info.index == index).and_then(|d| d.xids.as_mut());
            if let Some(counts) = counts {
                *counts.entry(code).or_insert(0) += 1;
            }
        }
        if let Some(e) = error {
            if !self.events_warned {
                tracing::warn!(error = %e, "reading GPU XID events failed; retried next poll");
                self.events_warned = true;
            }
        }
    }
}

fn ratio(percent: u32) -> f64 {
    f64::from(percent) / 100.0
}

fn mhz_to_hz(mhz: u32) -> u64 {
    u64::from(mhz) * 1_000_000
}

fn sample_device(
    library: &Library,
    state: &mut DeviceState,
    options: NvmlOptions,
    pids: &HashSet<u32>,
) -> DeviceSample {
    let index = state.info.index;
    let read = match library.nvml().device_by_index(index) {
        Ok(device) => read_device(library, &device, state, options, pids),
        Err(e) => {
            if !state.policy.is_failed() {
                tracing::warn!(gpu.index = index, error = %e, "GPU handle unavailable; reporting it as failed");
            }
            None
        }
    };
    state.policy.settle(&state.info, read)
}

/// Reads every field of `device`; `None` when the device turned out to be lost, so that a
/// half-read device never mixes values with a failed status.
fn read_device(
    library: &Library,
    device: &Device<'_>,
    state: &mut DeviceState,
    options: NvmlOptions,
    pids: &HashSet<u32>,
) -> Option<DeviceSample> {
    let nvml = library.nvml();
    let mut s = DeviceSample::new(Arc::clone(&state.info));
    // The policy is taken out for the poll so the activity readers can borrow the state too.
    let mut policy = std::mem::take(&mut state.policy);
    let mut p = Poll::new(state.info.index, &mut policy);

    if !state.mig {
        if let Some(u) = p.read(Field::Utilization, || device.utilization_rates()) {
            s.utilization = Some(ratio(u.gpu));
            s.memory_bandwidth_utilization = Some(ratio(u.memory));
        }
        s.encoder_utilization = p.read(Field::Encoder, || device.encoder_utilization()).map(|u| ratio(u.utilization));
        s.decoder_utilization = p.read(Field::Decoder, || device.decoder_utilization()).map(|u| ratio(u.utilization));
    }
    if let Some(m) = p.read(Field::Memory, || device.memory_info()) {
        s.memory_used_bytes = Some(m.used);
        s.memory_total_bytes = Some(m.total);
    }
    s.power_watts = p.read(Field::Power, || device.power_usage()).map(|mw| f64::from(mw) / 1e3);
    s.energy_millijoules = p.read(Field::Energy, || device.total_energy_consumption());
    s.energy_joules = s.energy_millijoules.map(|mj| mj as f64 / 1e3);
    s.temperature_celsius = p.read(Field::Temperature, || device.temperature(TemperatureSensor::Gpu)).map(f64::from);
    s.ecc_corrected =
        p.read(Field::EccCorrected, || device.total_ecc_errors(MemoryError::Corrected, EccCounter::Aggregate));
    s.ecc_uncorrected =
        p.read(Field::EccUncorrected, || device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate));
    let clock = |p: &mut Poll<'_>, field, kind| p.read(field, || device.clock_info(kind)).map(mhz_to_hz);
    s.clocks.graphics_hz = clock(&mut p, Field::ClockGraphics, Clock::Graphics);
    s.clocks.sm_hz = clock(&mut p, Field::ClockSm, Clock::SM);
    s.clocks.memory_hz = clock(&mut p, Field::ClockMemory, Clock::Memory);
    s.clocks.video_hz = clock(&mut p, Field::ClockVideo, Clock::Video);

    state.fans.retain(|&fan| match p.read_part(Field::FanSpeed, u64::from(fan), || device.fan_speed(fan)) {
        PartRead::Value(speed) => {
            s.fan_speeds.push((fan, ratio(speed)));
            true
        }
        PartRead::Drop => false,
        PartRead::Skip => true,
    });

    s.gpm = activity::read_gpm(library, state.info.index, &mut state.activity, &mut p);
    if let Some(g) = &s.gpm {
        // GPM's PCIe rates cover the whole interval and cost no blocking call.
        s.pcie_tx_bytes_per_second = g.pcie_tx_bytes_per_second;
        s.pcie_rx_bytes_per_second = g.pcie_rx_bytes_per_second;
    }
    s.mig_instances = activity::read_mig(library, device, state.info.index, &mut state.activity, &mut p);
    if options.pcie_throughput && s.pcie_tx_bytes_per_second.is_none() && s.pcie_rx_bytes_per_second.is_none() {
        // NVML reports KiB/s.
        s.pcie_tx_bytes_per_second =
            p.read(Field::PcieTx, || device.pcie_throughput(PcieUtilCounter::Send)).map(|kib| f64::from(kib) * 1024.0);
        s.pcie_rx_bytes_per_second = p
            .read(Field::PcieRx, || device.pcie_throughput(PcieUtilCounter::Receive))
            .map(|kib| f64::from(kib) * 1024.0);
    }
    s.processes = activity::read_processes(device, &mut state.activity, &mut p, pids);
    if s.processes.iter().any(|ps| ps.memory_used_bytes.is_some()) {
        s.process_memory_bytes = Some(s.processes.iter().filter_map(|ps| ps.memory_used_bytes).sum());
    }

    s.power_limit_watts = p.read(Field::PowerLimit, || device.enforced_power_limit()).map(|mw| f64::from(mw) / 1e3);
    if let Some(active) = p.read(Field::Throttle, || device.current_throttle_reasons()) {
        s.throttle_reasons = state.throttle_reasons.iter().map(|&(flag, name)| (name, active.contains(flag))).collect();
    }
    s.remapped_rows = p.read(Field::RemappedRows, || library::remapped_rows(nvml, device)).map(|r| RemappedRows {
        correctable: u64::from(r.0),
        uncorrectable: u64::from(r.1),
        pending: r.2,
        failure: r.3,
    });
    let pages = |p: &mut Poll<'_>, field, cause| p.read(field, || device.retired_pages(cause)).map(|v| v.len() as u64);
    s.retired_pages.single_bit = pages(&mut p, Field::RetiredSingleBit, RetirementCause::MultipleSingleBitEccErrors);
    s.retired_pages.double_bit = pages(&mut p, Field::RetiredDoubleBit, RetirementCause::DoubleBitEccError);
    s.retired_pages.pending = p.read(Field::RetiredPending, || device.are_pages_pending_retired());
    if let Some(xids) = &state.xids {
        s.xid_errors = xids.iter().map(|(&code, &n)| (code, n)).collect();
    }

    let lost = p.is_lost();
    state.policy = policy;
    (!lost).then_some(s)
}
