//! [`AmdSource`]: the [`GpuSource`] for AMD GPUs, on ROCm SMI (`librocm_smi64`).
//!
//! The library is opened with `dlopen` at run time, like NVML: building needs no ROCm, and a
//! binary built with the `amd` feature runs on machines without it. The bindings are our own
//! ([`ffi`], the crate's only `unsafe` code) and cover only the calls below; each symbol is
//! resolved on its own, so a library that lacks one (older or newer ROCm) loses only that field.
//!
//! ROCm SMI has no "GPU lost" code. A call answering `RSMI_STATUS_INIT_ERROR` after a
//! successful `rsmi_init` means the library lost its device state (driver unloaded, device
//! reset); that device is reported failed for the poll.

#[allow(unsafe_code)]
mod ffi;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use self::ffi::{Api, CallError, ClockType, Sensor};
use crate::error::GpuError;
use crate::names;
use crate::source::policy::{self, DevicePolicy, ErrorClass, PartRead, Poll, ReadError};
use crate::source::{DeviceInfo, DeviceSample, GpuSample, GpuSource};

/// The names ROCm SMI is looked up by, in order, when no path is configured: AMD's ROCm 6.1
/// and later, ROCm 6.0, ROCm 5, the Debian / Ubuntu / Fedora packages, the development link,
/// and AMD's default install directory (often not on the loader's search path).
pub const DEFAULT_ROCM_SMI_LIBRARIES: &[&str] = &[
    "librocm_smi64.so.7",
    "librocm_smi64.so.6",
    "librocm_smi64.so.5",
    "librocm_smi64.so.1",
    "librocm_smi64.so",
    "/opt/rocm/lib/librocm_smi64.so",
];

/// What a ROCm SMI error means for the polling policy.
fn class(error: CallError) -> ErrorClass {
    match error {
        // An answer in an unknown layout will not change between polls either.
        CallError::Missing(_) | CallError::Unexpected => ErrorClass::Unsupported,
        CallError::Status(
            ffi::RSMI_STATUS_INVALID_ARGS
            | ffi::RSMI_STATUS_NOT_SUPPORTED
            | ffi::RSMI_STATUS_PERMISSION
            | ffi::RSMI_STATUS_NOT_YET_IMPLEMENTED,
        ) => ErrorClass::Unsupported,
        CallError::Status(ffi::RSMI_STATUS_INIT_ERROR) => ErrorClass::Lost,
        CallError::Status(_) => ErrorClass::Transient,
    }
}

/// A failed call, printed in the library's own words only when a log line asks for it.
struct Failure<'a> {
    api: &'a Api,
    error: CallError,
}

impl fmt::Display for Failure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.api.describe(self.error))
    }
}

impl ReadError for Failure<'_> {
    fn class(&self) -> ErrorClass {
        class(self.error)
    }
}

policy::fields!(
    /// One ROCm SMI query of a device; the unit of "this device cannot do that, stop asking".
    Field {
        Busy => "rsmi_dev_busy_percent_get",
        MemoryTotal => "rsmi_dev_memory_total_get",
        MemoryUsed => "rsmi_dev_memory_usage_get",
        PowerAverage => "rsmi_dev_power_ave_get",
        PowerSocket => "rsmi_dev_current_socket_power_get",
        Energy => "rsmi_dev_energy_count_get",
        TemperatureEdge | TemperatureJunction => "rsmi_dev_temp_metric_get",
        Ecc => "rsmi_dev_ecc_count_get",
        ClockGraphics | ClockMemory => "rsmi_dev_gpu_clk_freq_get",
        Fan => "rsmi_dev_fan_speed_get",
    }
);

/// What the source remembers about one device between polls.
#[derive(Debug)]
struct DeviceState {
    info: Arc<DeviceInfo>,
    /// RAS blocks whose ECC counts are still read (`rsmi_gpu_block_t` bits); a block that
    /// cannot report is dropped for good.
    ecc_blocks: u64,
    policy: DevicePolicy,
}

/// A [`GpuSource`] reading AMD GPUs through ROCm SMI (`librocm_smi64`), loaded at run time.
///
/// Open it on the thread that will poll it ([`crate::GpuPoller`] does): `rsmi_init` scans
/// every device in sysfs. Dropping it calls `rsmi_shut_down` and unloads the library.
#[derive(Debug)]
pub struct AmdSource {
    api: Api,
    library: String,
    devices: Vec<DeviceState>,
}

impl Drop for AmdSource {
    fn drop(&mut self) {
        // rsmi_init succeeded for this source (it is only built after that); one shut-down
        // balances it before the library is unloaded.
        if let Err(CallError::Status(status)) = self.api.shut_down() {
            tracing::debug!(status, "rsmi_shut_down failed");
        }
    }
}

impl AmdSource {
    /// Loads ROCm SMI from `library` (default: the first of [`DEFAULT_ROCM_SMI_LIBRARIES`]
    /// that loads), initialises it and reads each device's identity.
    ///
    /// # Errors
    ///
    /// [`GpuError::LibraryNotLoaded`] when no file can be loaded or it is not ROCm SMI,
    /// [`GpuError::InitFailed`] when `rsmi_init` fails (no `amdgpu` driver, no
    /// `/sys/class/drm`, no permission) or devices cannot be counted, [`GpuError::NoDevice`]
    /// when it finds none.
    pub fn open(library: Option<&Path>) -> Result<Self, GpuError> {
        let (api, library) = match library {
            Some(path) => {
                let name = path.display().to_string();
                (Api::load(&name)?, name)
            }
            None => load_default()?,
        };
        if let Err(e) = api.init() {
            return Err(GpuError::InitFailed { reason: api.describe(e), library });
        }
        // From here on `Drop` balances the successful init, also on the error paths below.
        let mut source = Self { api, library, devices: Vec::new() };
        let count = source.api.device_count().map_err(|e| GpuError::InitFailed {
            library: source.library.clone(),
            reason: format!("cannot count devices: {}", source.api.describe(e)),
        })?;
        if count == 0 {
            return Err(GpuError::NoDevice { library: source.library.clone() });
        }
        source.devices = (0..count).map(|i| open_device(&source.api, i)).collect();
        Ok(source)
    }

    /// Identities of the devices found when the source opened.
    pub fn devices(&self) -> impl Iterator<Item = &Arc<DeviceInfo>> {
        self.devices.iter().map(|d| &d.info)
    }

    /// The library that was loaded (the configured path or the default name that loaded).
    pub fn library(&self) -> &str {
        &self.library
    }
}

/// Tries each default name; the error names them all with the first loader message (the
/// others are the same "not found" as a rule).
fn load_default() -> Result<(Api, String), GpuError> {
    let mut first_reason = None;
    for name in DEFAULT_ROCM_SMI_LIBRARIES {
        match Api::load(name) {
            Ok(api) => return Ok((api, (*name).to_owned())),
            // A file that loads but is not ROCm SMI is worth saying as is.
            Err(GpuError::LibraryNotLoaded { reason, .. }) if reason.starts_with("not a ROCm SMI") => {
                return Err(GpuError::LibraryNotLoaded { library: (*name).to_owned(), reason });
            }
            Err(GpuError::LibraryNotLoaded { reason, .. }) => {
                first_reason.get_or_insert(reason);
            }
            Err(other) => return Err(other),
        }
    }
    Err(GpuError::LibraryNotLoaded {
        library: DEFAULT_ROCM_SMI_LIBRARIES.join(" or "),
        reason: first_reason.unwrap_or_default(),
    })
}

/// `rsmi_dev_pci_id_get`'s encoding: domain << 32 | bus << 8 | device << 3 | function.
fn pci_bus_id(bdf: u64) -> String {
    format!("{:04x}:{:02x}:{:02x}.{:x}", bdf >> 32, (bdf >> 8) & 0xff, (bdf >> 3) & 0x1f, bdf & 0x7)
}

fn open_device(api: &Api, index: u32) -> DeviceState {
    // The unique id as `rocm-smi` prints it; parts without one fall back to the PCI address,
    // which is stable while the card sits in its slot.
    let id = api
        .unique_id(index)
        .map(|id| format!("{id:#x}"))
        .or_else(|_| api.pci_id(index).map(pci_bus_id))
        .unwrap_or_else(|_| format!("{}-gpu-{index}", names::VENDOR_AMD));
    let name = api.name(index).unwrap_or_default();
    let ecc_blocks = api.ecc_enabled(index).unwrap_or(0);
    DeviceState {
        info: Arc::new(DeviceInfo::new(index, id, name, names::VENDOR_AMD)),
        ecc_blocks,
        policy: DevicePolicy::answering(),
    }
}

impl GpuSource for AmdSource {
    fn platform(&self) -> &'static str {
        names::VENDOR_AMD
    }

    fn sample(&mut self) -> Result<GpuSample, GpuError> {
        let Self { api, devices, .. } = self;
        let samples = devices
            .iter_mut()
            .map(|state| {
                let read = read_device(api, state);
                state.policy.settle(&state.info, read)
            })
            .collect();
        Ok(GpuSample::new(samples))
    }
}

fn ratio(percent: u32) -> f64 {
    f64::from(percent) / 100.0
}

/// Reads every field of device `state`; `None` when the device turned out to be lost, so
/// that a half-read device never mixes values with a failed status.
fn read_device(api: &Api, state: &mut DeviceState) -> Option<DeviceSample> {
    let mut s = DeviceSample::new(Arc::clone(&state.info));
    let dv = state.info.index;
    let mut p = Poll::new(dv, &mut state.policy);
    // Every call's error goes to the policy with the library at hand to describe it.
    let on = |error| Failure { api, error };

    s.utilization = p.read(Field::Busy, || api.busy_percent(dv).map_err(on)).map(ratio);
    s.memory_total_bytes = p.read(Field::MemoryTotal, || api.memory_total(dv).map_err(on));
    s.memory_used_bytes = p.read(Field::MemoryUsed, || api.memory_used(dv).map_err(on));
    s.power_watts = p
        .read_or(Field::PowerAverage, Field::PowerSocket, |field| match field {
            Field::PowerAverage => api.power_average(dv).map_err(on),
            _ => api.socket_power(dv).map_err(on),
        })
        .map(|microwatts| microwatts as f64 / 1e6);
    s.energy_joules = p.read(Field::Energy, || api.energy_joules(dv).map_err(on));
    s.temperature_celsius = p
        .read_or(Field::TemperatureEdge, Field::TemperatureJunction, |field| {
            let sensor = if field == Field::TemperatureEdge { Sensor::Edge } else { Sensor::Junction };
            api.temperature(dv, sensor).map_err(on)
        })
        .map(|millidegrees| millidegrees as f64 / 1e3);
    if let Some((corrected, uncorrected)) = ecc(api, &mut p, &mut state.ecc_blocks, dv) {
        s.ecc_corrected = Some(corrected);
        s.ecc_uncorrected = Some(uncorrected);
    }
    s.clocks.graphics_hz = p.read(Field::ClockGraphics, || api.clock_hz(dv, ClockType::System).map_err(on));
    s.clocks.memory_hz = p.read(Field::ClockMemory, || api.clock_hz(dv, ClockType::Memory).map_err(on));
    if let Some(Some(speed)) = p.read(Field::Fan, || api.fan_ratio(dv).map_err(on)) {
        s.fan_speeds.push((0, speed));
    }

    (!p.is_lost()).then_some(s)
}

/// Corrected and uncorrected ECC errors summed over the RAS blocks that count them.
/// Nothing when any block failed this poll: a partial sum would make the counter drop.
fn ecc(api: &Api, p: &mut Poll<'_>, blocks: &mut u64, dv: u32) -> Option<(u64, u64)> {
    if !p.wants(Field::Ecc) || *blocks == 0 {
        return None;
    }
    let (mut corrected, mut uncorrected, mut complete) = (0u64, 0u64, true);
    for bit in 0..64 {
        let block = 1u64 << bit;
        if *blocks & block == 0 {
            continue;
        }
        match p.read_part(Field::Ecc, block, || api.ecc_count(dv, block).map_err(|error| Failure { api, error })) {
            PartRead::Value(c) => {
                corrected = corrected.saturating_add(c.correctable);
                uncorrected = uncorrected.saturating_add(c.uncorrectable);
            }
            PartRead::Drop => *blocks &= !block,
            PartRead::Skip if p.is_lost() => return None,
            PartRead::Skip => complete = false,
        }
    }
    if *blocks == 0 {
        p.drop_field(Field::Ecc);
        return None;
    }
    complete.then_some((corrected, uncorrected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_print_like_lspci() {
        let bdf = (0x1u64 << 32) | (0xc3 << 8) | (0x1f << 3) | 0x7;
        assert_eq!(pci_bus_id(bdf), "0001:c3:1f.7");
        assert_eq!(pci_bus_id(3 << 8), "0000:03:00.0");
    }

    #[test]
    fn error_classes_follow_the_status() {
        assert_eq!(class(CallError::Status(ffi::RSMI_STATUS_NOT_SUPPORTED)), ErrorClass::Unsupported);
        assert_eq!(class(CallError::Status(ffi::RSMI_STATUS_PERMISSION)), ErrorClass::Unsupported);
        assert_eq!(class(CallError::Missing("rsmi_x")), ErrorClass::Unsupported);
        assert_eq!(class(CallError::Unexpected), ErrorClass::Unsupported);
        assert_eq!(class(CallError::Status(ffi::RSMI_STATUS_INIT_ERROR)), ErrorClass::Lost);
        // RSMI_STATUS_BUSY and RSMI_STATUS_UNKNOWN_ERROR: try again next poll.
        assert_eq!(class(CallError::Status(16)), ErrorClass::Transient);
        assert_eq!(class(CallError::Status(0xFFFF_FFFF)), ErrorClass::Transient);
    }
}
