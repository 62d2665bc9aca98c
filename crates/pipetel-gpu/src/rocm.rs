//! [`AmdSource`]: the [`GpuSource`] for AMD GPUs, on ROCm SMI (`librocm_smi64`).
//!
//! The library is opened with `dlopen` at run time, like NVML: building needs no ROCm, and a
//! binary built with the `amd` feature runs on machines without it. The bindings are our own
//! and cover only the calls below; each symbol is resolved on its own, so a library that lacks
//! one (older or newer ROCm) loses only that field.
//!
//! ROCm SMI has no "GPU lost" code. A call answering `RSMI_STATUS_INIT_ERROR` after a
//! successful `rsmi_init` means the library lost its device state (driver unloaded, device
//! reset); that device is reported failed for the poll.

use std::ffi::{c_char, c_void, CStr};
use std::path::Path;
use std::sync::Arc;

use libloading::Library;

use crate::error::GpuError;
use crate::names;
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

/// `rsmi_status_t`.
type Status = u32;

const RSMI_STATUS_SUCCESS: Status = 0;
const RSMI_STATUS_INVALID_ARGS: Status = 1;
const RSMI_STATUS_NOT_SUPPORTED: Status = 2;
const RSMI_STATUS_PERMISSION: Status = 4;
const RSMI_STATUS_INIT_ERROR: Status = 8;
const RSMI_STATUS_NOT_YET_IMPLEMENTED: Status = 9;

/// `rsmi_clk_type_t`: the graphics (system) clock and the memory clock.
const RSMI_CLK_TYPE_SYS: u32 = 0;
const RSMI_CLK_TYPE_MEM: u32 = 4;
/// `rsmi_memory_type_t`: device memory.
const RSMI_MEM_TYPE_VRAM: u32 = 0;
/// `rsmi_temperature_type_t`: the edge sensor, and the junction (hotspot) sensor that
/// data-centre parts have instead.
const RSMI_TEMP_TYPE_EDGE: u32 = 0;
const RSMI_TEMP_TYPE_JUNCTION: u32 = 1;
/// `rsmi_temperature_metric_t`: the current reading.
const RSMI_TEMP_CURRENT: u32 = 0;
/// Fan speeds are relative to this value (`RSMI_MAX_FAN_SPEED`); the header says to divide by it.
const RSMI_MAX_FAN_SPEED: f64 = 255.0;

/// `rsmi_error_count_t`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct ErrorCount {
    correctable: u64,
    uncorrectable: u64,
}

/// Room for `rsmi_frequencies_t` in either layout (264 bytes up to ROCm 5, 280 from ROCm 6),
/// with margin; aligned like the struct's `uint64_t` array.
#[repr(C, align(8))]
struct FrequencyBuffer([u8; 512]);

type InitFn = unsafe extern "C" fn(u64) -> Status;
type ShutDownFn = unsafe extern "C" fn() -> Status;
type CountFn = unsafe extern "C" fn(*mut u32) -> Status;
type StatusStringFn = unsafe extern "C" fn(Status, *mut *const c_char) -> Status;
type NameFn = unsafe extern "C" fn(u32, *mut c_char, usize) -> Status;
type U64Fn = unsafe extern "C" fn(u32, *mut u64) -> Status;
type U32Fn = unsafe extern "C" fn(u32, *mut u32) -> Status;
type MemoryFn = unsafe extern "C" fn(u32, u32, *mut u64) -> Status;
type PowerAveFn = unsafe extern "C" fn(u32, u32, *mut u64) -> Status;
type EnergyFn = unsafe extern "C" fn(u32, *mut u64, *mut f32, *mut u64) -> Status;
type TempFn = unsafe extern "C" fn(u32, u32, u32, *mut i64) -> Status;
type EccCountFn = unsafe extern "C" fn(u32, u64, *mut ErrorCount) -> Status;
type ClockFn = unsafe extern "C" fn(u32, u32, *mut c_void) -> Status;
type FanFn = unsafe extern "C" fn(u32, u32, *mut i64) -> Status;

/// Why one call gave no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallError {
    /// The library does not export the function.
    Missing(&'static str),
    /// The function returned this status.
    Status(Status),
    /// The function succeeded but its answer makes no sense (e.g. a clock table in neither
    /// known layout).
    Unexpected,
}

/// What to do after an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrorClass {
    /// The device cannot answer this call: stop asking.
    Permanent,
    /// The library lost the device: report it failed this poll.
    Lost,
    /// Skip this poll, retry the next.
    Transient,
}

impl CallError {
    fn class(self) -> ErrorClass {
        match self {
            // An answer in an unknown layout will not change between polls either.
            Self::Missing(_) | Self::Unexpected => ErrorClass::Permanent,
            Self::Status(
                RSMI_STATUS_INVALID_ARGS
                | RSMI_STATUS_NOT_SUPPORTED
                | RSMI_STATUS_PERMISSION
                | RSMI_STATUS_NOT_YET_IMPLEMENTED,
            ) => ErrorClass::Permanent,
            Self::Status(RSMI_STATUS_INIT_ERROR) => ErrorClass::Lost,
            Self::Status(_) => ErrorClass::Transient,
        }
    }
}

fn check(status: Status) -> Result<(), CallError> {
    if status == RSMI_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(CallError::Status(status))
    }
}

/// The ROCm SMI entry points pipetel uses, resolved once from the loaded library.
///
/// Every function pointer stays valid while `_library` is loaded: the struct owns the
/// library and is dropped (after `rsmi_shut_down`) as one.
struct Api {
    init: InitFn,
    shut_down: ShutDownFn,
    num_monitor_devices: CountFn,
    status_string: Option<StatusStringFn>,
    name: Option<NameFn>,
    unique_id: Option<U64Fn>,
    pci_id: Option<U64Fn>,
    busy_percent: Option<U32Fn>,
    memory_total: Option<MemoryFn>,
    memory_usage: Option<MemoryFn>,
    power_ave: Option<PowerAveFn>,
    socket_power: Option<U64Fn>,
    energy_count: Option<EnergyFn>,
    temp_metric: Option<TempFn>,
    ecc_enabled: Option<U64Fn>,
    ecc_count: Option<EccCountFn>,
    clock_freq: Option<ClockFn>,
    fan_speed: Option<FanFn>,
    _library: Library,
}

/// Resolves `name` in `library` as a `T`.
///
/// # Safety
///
/// `T` must be the function pointer type of the C declaration of `name` in `rocm_smi.h`.
unsafe fn symbol<T: Copy>(library: &Library, name: &str) -> Option<T> {
    // SAFETY: the caller guarantees the type; the pointer is only used while `library` lives
    // (both are kept together in `Api`).
    unsafe { library.get::<T>(name.as_bytes()).ok().map(|s| *s) }
}

impl Api {
    /// Loads the library and resolves its symbols; `None` for `rsmi_init` means "not ROCm SMI".
    fn load(path: &str) -> Result<Self, GpuError> {
        // SAFETY: loading runs the library's initialisers; ROCm SMI's only set up its own
        // state. The loaded file is what the user configured or a ROCm SMI name.
        let library = unsafe { Library::new(path) }
            .map_err(|e| GpuError::LibraryNotLoaded { library: path.to_owned(), reason: e.to_string() })?;
        // SAFETY (every `symbol` call below): each type is the declaration in rocm_smi.h
        // (ROCm 5.2 to 6.x; none of these signatures changed).
        let required = |name: &str| GpuError::LibraryNotLoaded {
            library: path.to_owned(),
            reason: format!("not a ROCm SMI library: symbol {name} not found"),
        };
        unsafe {
            Ok(Self {
                init: symbol(&library, "rsmi_init").ok_or_else(|| required("rsmi_init"))?,
                shut_down: symbol(&library, "rsmi_shut_down").ok_or_else(|| required("rsmi_shut_down"))?,
                num_monitor_devices: symbol(&library, "rsmi_num_monitor_devices")
                    .ok_or_else(|| required("rsmi_num_monitor_devices"))?,
                status_string: symbol(&library, "rsmi_status_string"),
                name: symbol(&library, "rsmi_dev_name_get"),
                unique_id: symbol(&library, "rsmi_dev_unique_id_get"),
                pci_id: symbol(&library, "rsmi_dev_pci_id_get"),
                busy_percent: symbol(&library, "rsmi_dev_busy_percent_get"),
                memory_total: symbol(&library, "rsmi_dev_memory_total_get"),
                memory_usage: symbol(&library, "rsmi_dev_memory_usage_get"),
                power_ave: symbol(&library, "rsmi_dev_power_ave_get"),
                socket_power: symbol(&library, "rsmi_dev_current_socket_power_get"),
                energy_count: symbol(&library, "rsmi_dev_energy_count_get"),
                temp_metric: symbol(&library, "rsmi_dev_temp_metric_get"),
                ecc_enabled: symbol(&library, "rsmi_dev_ecc_enabled_get"),
                ecc_count: symbol(&library, "rsmi_dev_ecc_count_get"),
                clock_freq: symbol(&library, "rsmi_dev_gpu_clk_freq_get"),
                fan_speed: symbol(&library, "rsmi_dev_fan_speed_get"),
                _library: library,
            })
        }
    }

    /// The library's text for `status`, with the number.
    fn describe(&self, error: CallError) -> String {
        let status = match error {
            CallError::Missing(name) => return format!("symbol {name} not found"),
            CallError::Unexpected => return "unexpected data".to_owned(),
            CallError::Status(s) => s,
        };
        let mut text: *const c_char = std::ptr::null();
        let known = self.status_string.is_some_and(|f| {
            // SAFETY: `f` is rsmi_status_string; `text` outlives the call.
            unsafe { f(status, &mut text) == RSMI_STATUS_SUCCESS && !text.is_null() }
        });
        if known {
            // SAFETY: on success the library points `text` at a static NUL-terminated string.
            let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
            format!("{text} (status {status})")
        } else {
            format!("status {status}")
        }
    }

    fn device_count(&self) -> Result<u32, CallError> {
        let mut n = 0u32;
        // SAFETY: rsmi_num_monitor_devices writes one u32 to a valid pointer.
        check(unsafe { (self.num_monitor_devices)(&mut n) })?;
        Ok(n)
    }

    fn name(&self, dv: u32) -> Result<String, CallError> {
        let f = self.name.ok_or(CallError::Missing("rsmi_dev_name_get"))?;
        let mut buf = [0u8; 256];
        // SAFETY: the library writes at most `len` bytes into `buf`.
        check(unsafe { f(dv, buf.as_mut_ptr().cast(), buf.len()) })?;
        // The text ends at the first NUL inside the buffer; never read past it.
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).trim().to_owned())
    }

    fn u64_call(&self, f: Option<U64Fn>, name: &'static str, dv: u32) -> Result<u64, CallError> {
        let f = f.ok_or(CallError::Missing(name))?;
        let mut v = 0u64;
        // SAFETY: `f` writes one u64 to a valid pointer.
        check(unsafe { f(dv, &mut v) })?;
        Ok(v)
    }

    fn busy_percent(&self, dv: u32) -> Result<u32, CallError> {
        let f = self.busy_percent.ok_or(CallError::Missing("rsmi_dev_busy_percent_get"))?;
        let mut v = 0u32;
        // SAFETY: rsmi_dev_busy_percent_get writes one u32 to a valid pointer.
        check(unsafe { f(dv, &mut v) })?;
        Ok(v)
    }

    fn memory(&self, f: Option<MemoryFn>, name: &'static str, dv: u32) -> Result<u64, CallError> {
        let f = f.ok_or(CallError::Missing(name))?;
        let mut v = 0u64;
        // SAFETY: `f` writes one u64 to a valid pointer.
        check(unsafe { f(dv, RSMI_MEM_TYPE_VRAM, &mut v) })?;
        Ok(v)
    }

    /// Average power of sensor 0, microwatts.
    fn power_average(&self, dv: u32) -> Result<u64, CallError> {
        let f = self.power_ave.ok_or(CallError::Missing("rsmi_dev_power_ave_get"))?;
        let mut v = 0u64;
        // SAFETY: rsmi_dev_power_ave_get writes one u64 to a valid pointer.
        check(unsafe { f(dv, 0, &mut v) })?;
        Ok(v)
    }

    /// Energy since driver load, joules.
    fn energy_joules(&self, dv: u32) -> Result<f64, CallError> {
        let f = self.energy_count.ok_or(CallError::Missing("rsmi_dev_energy_count_get"))?;
        let (mut count, mut resolution, mut timestamp) = (0u64, 0f32, 0u64);
        // SAFETY: rsmi_dev_energy_count_get writes a u64, an f32 and a u64 to valid pointers.
        check(unsafe { f(dv, &mut count, &mut resolution, &mut timestamp) })?;
        // The counter counts ticks of `resolution` microjoules.
        let resolution = f64::from(resolution);
        if !resolution.is_finite() || resolution <= 0.0 {
            return Err(CallError::Unexpected);
        }
        Ok(count as f64 * resolution / 1e6)
    }

    /// Current temperature of `sensor`, millidegrees Celsius.
    fn temperature(&self, dv: u32, sensor: u32) -> Result<i64, CallError> {
        let f = self.temp_metric.ok_or(CallError::Missing("rsmi_dev_temp_metric_get"))?;
        let mut v = 0i64;
        // SAFETY: rsmi_dev_temp_metric_get writes one i64 to a valid pointer.
        check(unsafe { f(dv, sensor, RSMI_TEMP_CURRENT, &mut v) })?;
        Ok(v)
    }

    fn ecc_count(&self, dv: u32, block: u64) -> Result<ErrorCount, CallError> {
        let f = self.ecc_count.ok_or(CallError::Missing("rsmi_dev_ecc_count_get"))?;
        let mut v = ErrorCount::default();
        // SAFETY: rsmi_dev_ecc_count_get writes one rsmi_error_count_t to a valid pointer.
        check(unsafe { f(dv, block, &mut v) })?;
        Ok(v)
    }

    /// Current frequency of clock `kind`, hertz.
    fn clock_hz(&self, dv: u32, kind: u32) -> Result<u64, CallError> {
        let f = self.clock_freq.ok_or(CallError::Missing("rsmi_dev_gpu_clk_freq_get"))?;
        let mut buf = FrequencyBuffer([0; 512]);
        // SAFETY: the library writes one rsmi_frequencies_t, at most 280 bytes in any known
        // ROCm version, into a zeroed 512-byte buffer aligned for it.
        check(unsafe { f(dv, kind, std::ptr::addr_of_mut!(buf).cast()) })?;
        current_frequency(&buf.0).ok_or(CallError::Unexpected)
    }

    /// Speed of fan 0 as a fraction of its maximum.
    fn fan_ratio(&self, dv: u32) -> Result<Option<f64>, CallError> {
        let f = self.fan_speed.ok_or(CallError::Missing("rsmi_dev_fan_speed_get"))?;
        let mut v = 0i64;
        // SAFETY: rsmi_dev_fan_speed_get writes one i64 to a valid pointer.
        check(unsafe { f(dv, 0, &mut v) })?;
        Ok((v >= 0).then(|| v as f64 / RSMI_MAX_FAN_SPEED))
    }
}

fn u32_at(buf: &[u8], offset: usize) -> Option<u32> {
    buf.get(offset..offset + 4).and_then(|b| b.try_into().ok()).map(u32::from_ne_bytes)
}

fn u64_at(buf: &[u8], offset: usize) -> Option<u64> {
    buf.get(offset..offset + 8).and_then(|b| b.try_into().ok()).map(u64::from_ne_bytes)
}

/// The current frequency in an `rsmi_frequencies_t`, whichever layout the library wrote.
///
/// Up to ROCm 5 the struct is `{u32 num_supported; u32 current; u64 frequency[32]}`; from
/// ROCm 6 it is `{bool has_deep_sleep; u32 num_supported; u32 current; u64 frequency[33]}`,
/// under the same function name and, in distribution builds, the same library version. The
/// two never both validate on a zeroed buffer: in the old layout the first word is the count
/// (at least 1), and a count of 1 puts the current index 0 where the new layout's count must
/// be at least 1; in the new layout the first word is 0 or 1, and 1 would make the old
/// layout's current index (the new count, at least 1) out of range.
fn current_frequency(buf: &[u8]) -> Option<u64> {
    let pick = |count: u32, current: u32, max: u32, table: usize| {
        (count >= 1 && count <= max && current < count).then(|| u64_at(buf, table + 8 * current as usize)).flatten()
    };
    let old = pick(u32_at(buf, 0)?, u32_at(buf, 4)?, 32, 8);
    let deep_sleep_flag = *buf.first()?;
    let new = if deep_sleep_flag <= 1 { pick(u32_at(buf, 4)?, u32_at(buf, 8)?, 33, 16) } else { None };
    old.or(new)
}

/// One ROCm SMI query of a device; the unit of "this device cannot do that, stop asking".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Busy,
    MemoryTotal,
    MemoryUsed,
    PowerAverage,
    PowerSocket,
    Energy,
    TemperatureEdge,
    TemperatureJunction,
    Ecc,
    ClockGraphics,
    ClockMemory,
    Fan,
}

impl Field {
    fn bit(self) -> u32 {
        1 << (self as u32)
    }

    fn rsmi_call(self) -> &'static str {
        match self {
            Self::Busy => "rsmi_dev_busy_percent_get",
            Self::MemoryTotal => "rsmi_dev_memory_total_get",
            Self::MemoryUsed => "rsmi_dev_memory_usage_get",
            Self::PowerAverage => "rsmi_dev_power_ave_get",
            Self::PowerSocket => "rsmi_dev_current_socket_power_get",
            Self::Energy => "rsmi_dev_energy_count_get",
            Self::TemperatureEdge | Self::TemperatureJunction => "rsmi_dev_temp_metric_get",
            Self::Ecc => "rsmi_dev_ecc_count_get",
            Self::ClockGraphics | Self::ClockMemory => "rsmi_dev_gpu_clk_freq_get",
            Self::Fan => "rsmi_dev_fan_speed_get",
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct FieldSet(u32);

impl FieldSet {
    fn contains(self, f: Field) -> bool {
        self.0 & f.bit() != 0
    }
    fn insert(&mut self, f: Field) {
        self.0 |= f.bit();
    }
}

/// What the source remembers about one device between polls.
#[derive(Debug)]
struct DeviceState {
    info: Arc<DeviceInfo>,
    /// RAS blocks whose ECC counts are still read (`rsmi_gpu_block_t` bits); a block that
    /// says "not supported" is dropped for good.
    ecc_blocks: u64,
    /// Queries that answered not supported / no permission / missing symbol: never asked again.
    unsupported: FieldSet,
    /// Queries whose transient error was already logged at warn level.
    warned: FieldSet,
    /// Whether the previous poll found the device failed (to log transitions only).
    failed: bool,
}

/// A [`GpuSource`] reading AMD GPUs through ROCm SMI (`librocm_smi64`), loaded at run time.
///
/// Open it on the thread that will poll it ([`crate::GpuPoller`] does): `rsmi_init` scans
/// every device in sysfs. Dropping it calls `rsmi_shut_down` and unloads the library.
pub struct AmdSource {
    api: Api,
    library: String,
    devices: Vec<DeviceState>,
}

impl std::fmt::Debug for AmdSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmdSource")
            .field("library", &self.library)
            .field("devices", &self.devices)
            .finish_non_exhaustive()
    }
}

impl Drop for AmdSource {
    fn drop(&mut self) {
        // SAFETY: rsmi_init succeeded for this source (it is only built after that); one
        // shut-down balances it before the library is unloaded.
        let status = unsafe { (self.api.shut_down)() };
        if status != RSMI_STATUS_SUCCESS {
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
        // SAFETY: rsmi_init takes flags by value; 0 asks for the default (GPUs only).
        let status = unsafe { (api.init)(0) };
        if status != RSMI_STATUS_SUCCESS {
            let reason = api.describe(CallError::Status(status));
            return Err(GpuError::InitFailed { library, reason });
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
        .u64_call(api.unique_id, "rsmi_dev_unique_id_get", index)
        .map(|id| format!("{id:#x}"))
        .or_else(|_| api.u64_call(api.pci_id, "rsmi_dev_pci_id_get", index).map(pci_bus_id))
        .unwrap_or_else(|_| format!("{}-gpu-{index}", names::VENDOR_AMD));
    let name = api.name(index).unwrap_or_default();
    let ecc_blocks = api.u64_call(api.ecc_enabled, "rsmi_dev_ecc_enabled_get", index).unwrap_or(0);
    DeviceState {
        info: Arc::new(DeviceInfo::new(index, id, name, names::VENDOR_AMD)),
        ecc_blocks,
        unsupported: FieldSet::default(),
        warned: FieldSet::default(),
        failed: false,
    }
}

impl GpuSource for AmdSource {
    fn platform(&self) -> &'static str {
        names::VENDOR_AMD
    }

    fn sample(&mut self) -> Result<GpuSample, GpuError> {
        let Self { api, devices, .. } = self;
        let samples = devices.iter_mut().map(|state| sample_device(api, state)).collect();
        Ok(GpuSample::new(samples))
    }
}

/// Reads of one device in one poll; stops asking once the device is found lost.
struct DevicePoll<'a> {
    api: &'a Api,
    state: &'a mut DeviceState,
    lost: bool,
}

impl DevicePoll<'_> {
    fn read<T>(&mut self, field: Field, call: impl FnOnce(&Api) -> Result<T, CallError>) -> Option<T> {
        if self.lost || self.state.unsupported.contains(field) {
            return None;
        }
        match call(self.api) {
            Ok(v) => Some(v),
            Err(e) => {
                self.on_error(field, e);
                None
            }
        }
    }

    /// Reads `first`; once the device has said `first` is unsupported, reads `fallback`
    /// instead (e.g. ROCm 6 data-centre parts report socket power, not average power).
    fn read_or<T>(
        &mut self,
        first: Field,
        fallback: Field,
        call: impl Fn(&Api, Field) -> Result<T, CallError>,
    ) -> Option<T> {
        let value = self.read(first, |api| call(api, first));
        if value.is_none() && self.state.unsupported.contains(first) {
            return self.read(fallback, |api| call(api, fallback));
        }
        value
    }

    fn on_error(&mut self, field: Field, error: CallError) {
        let index = self.state.info.index;
        match error.class() {
            // Permanent for this device and library: remember and never ask again, so a
            // missing feature costs one call, not one per poll.
            ErrorClass::Permanent => {
                self.state.unsupported.insert(field);
                tracing::debug!(gpu.index = index, call = field.rsmi_call(), error = %self.api.describe(error),
                    "GPU field not available; no longer read");
            }
            ErrorClass::Lost => self.lost = true,
            ErrorClass::Transient if !self.state.warned.contains(field) => {
                self.state.warned.insert(field);
                tracing::warn!(gpu.index = index, call = field.rsmi_call(), error = %self.api.describe(error),
                    "GPU field read failed; skipped this poll, retried next poll");
            }
            ErrorClass::Transient => {
                tracing::debug!(gpu.index = index, call = field.rsmi_call(), error = %self.api.describe(error),
                    "GPU field read failed again");
            }
        }
    }

    /// Corrected and uncorrected ECC errors summed over the RAS blocks that count them.
    /// Nothing when any block failed this poll: a partial sum would make the counter drop.
    fn ecc(&mut self) -> Option<(u64, u64)> {
        if self.lost || self.state.unsupported.contains(Field::Ecc) || self.state.ecc_blocks == 0 {
            return None;
        }
        let (mut corrected, mut uncorrected, mut complete) = (0u64, 0u64, true);
        for bit in 0..64 {
            let block = 1u64 << bit;
            if self.state.ecc_blocks & block == 0 {
                continue;
            }
            match self.api.ecc_count(self.state.info.index, block) {
                Ok(c) => {
                    corrected = corrected.saturating_add(c.correctable);
                    uncorrected = uncorrected.saturating_add(c.uncorrectable);
                }
                Err(e) if e.class() == ErrorClass::Permanent => self.state.ecc_blocks &= !block,
                Err(e) => {
                    complete = false;
                    self.on_error(Field::Ecc, e);
                    if self.lost {
                        return None;
                    }
                }
            }
        }
        if self.state.ecc_blocks == 0 {
            self.state.unsupported.insert(Field::Ecc);
            return None;
        }
        complete.then_some((corrected, uncorrected))
    }
}

fn ratio(percent: u32) -> f64 {
    f64::from(percent) / 100.0
}

fn sample_device(api: &Api, state: &mut DeviceState) -> DeviceSample {
    let info = Arc::clone(&state.info);
    match read_device(api, state) {
        Some(s) => {
            if state.failed {
                tracing::info!(gpu.index = info.index, "GPU answers again");
                state.failed = false;
            }
            s
        }
        None => {
            if !state.failed {
                tracing::warn!(gpu.index = info.index, gpu.id = %info.id, "GPU lost; reporting it as failed");
                state.failed = true;
            }
            DeviceSample::failed(info)
        }
    }
}

/// Reads every field of device `state`; `None` when the device turned out to be lost, so
/// that a half-read device never mixes values with a failed status.
fn read_device(api: &Api, state: &mut DeviceState) -> Option<DeviceSample> {
    let mut s = DeviceSample::new(Arc::clone(&state.info));
    let dv = state.info.index;
    let mut p = DevicePoll { api, state, lost: false };

    s.utilization = p.read(Field::Busy, |api| api.busy_percent(dv)).map(ratio);
    s.memory_total_bytes =
        p.read(Field::MemoryTotal, |api| api.memory(api.memory_total, "rsmi_dev_memory_total_get", dv));
    s.memory_used_bytes =
        p.read(Field::MemoryUsed, |api| api.memory(api.memory_usage, "rsmi_dev_memory_usage_get", dv));
    s.power_watts = p
        .read_or(Field::PowerAverage, Field::PowerSocket, |api, field| match field {
            Field::PowerAverage => api.power_average(dv),
            _ => api.u64_call(api.socket_power, "rsmi_dev_current_socket_power_get", dv),
        })
        .map(|microwatts| microwatts as f64 / 1e6);
    s.energy_joules = p.read(Field::Energy, |api| api.energy_joules(dv));
    s.temperature_celsius = p
        .read_or(Field::TemperatureEdge, Field::TemperatureJunction, |api, field| {
            let sensor = if field == Field::TemperatureEdge { RSMI_TEMP_TYPE_EDGE } else { RSMI_TEMP_TYPE_JUNCTION };
            api.temperature(dv, sensor)
        })
        .map(|millidegrees| millidegrees as f64 / 1e3);
    if let Some((corrected, uncorrected)) = p.ecc() {
        s.ecc_corrected = Some(corrected);
        s.ecc_uncorrected = Some(uncorrected);
    }
    s.clocks.graphics_hz = p.read(Field::ClockGraphics, |api| api.clock_hz(dv, RSMI_CLK_TYPE_SYS));
    s.clocks.memory_hz = p.read(Field::ClockMemory, |api| api.clock_hz(dv, RSMI_CLK_TYPE_MEM));
    if let Some(Some(speed)) = p.read(Field::Fan, |api| api.fan_ratio(dv)) {
        s.fan_speeds.push((0, speed));
    }

    (!p.lost).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v5(count: u32, current: u32, freqs: &[u64]) -> Vec<u8> {
        let mut buf = vec![0u8; 512];
        buf[0..4].copy_from_slice(&count.to_ne_bytes());
        buf[4..8].copy_from_slice(&current.to_ne_bytes());
        for (i, f) in freqs.iter().enumerate() {
            buf[8 + 8 * i..16 + 8 * i].copy_from_slice(&f.to_ne_bytes());
        }
        buf
    }

    fn v6(deep_sleep: bool, count: u32, current: u32, freqs: &[u64]) -> Vec<u8> {
        let mut buf = vec![0u8; 512];
        buf[0] = u8::from(deep_sleep);
        buf[4..8].copy_from_slice(&count.to_ne_bytes());
        buf[8..12].copy_from_slice(&current.to_ne_bytes());
        for (i, f) in freqs.iter().enumerate() {
            buf[16 + 8 * i..24 + 8 * i].copy_from_slice(&f.to_ne_bytes());
        }
        buf
    }

    #[test]
    fn frequency_tables_decode_in_both_layouts() {
        assert_eq!(current_frequency(&v5(3, 2, &[500, 800, 1700])), Some(1700));
        assert_eq!(current_frequency(&v5(1, 0, &[900])), Some(900));
        assert_eq!(current_frequency(&v6(false, 3, 1, &[500, 800, 1700])), Some(800));
        assert_eq!(current_frequency(&v6(true, 2, 0, &[5, 2100])), Some(5));
        assert_eq!(current_frequency(&v6(true, 1, 0, &[2100])), Some(2100));
        // 33 entries exist only in the new layout.
        let freqs: Vec<u64> = (1..=33).collect();
        assert_eq!(current_frequency(&v6(false, 33, 32, &freqs)), Some(33));
    }

    #[test]
    fn nonsense_frequency_tables_are_rejected() {
        assert_eq!(current_frequency(&[0u8; 512]), None);
        assert_eq!(current_frequency(&v5(3, 3, &[1, 2, 3])), None);
        assert_eq!(current_frequency(&v5(40, 0, &[1])), None);
        assert_eq!(current_frequency(&[1u8; 6]), None);
    }

    #[test]
    fn pci_addresses_print_like_lspci() {
        let bdf = (0x1u64 << 32) | (0xc3 << 8) | (0x1f << 3) | 0x7;
        assert_eq!(pci_bus_id(bdf), "0001:c3:1f.7");
        assert_eq!(pci_bus_id(3 << 8), "0000:03:00.0");
    }

    #[test]
    fn error_classes_follow_the_status() {
        assert_eq!(CallError::Status(RSMI_STATUS_NOT_SUPPORTED).class(), ErrorClass::Permanent);
        assert_eq!(CallError::Status(RSMI_STATUS_PERMISSION).class(), ErrorClass::Permanent);
        assert_eq!(CallError::Missing("rsmi_x").class(), ErrorClass::Permanent);
        assert_eq!(CallError::Status(RSMI_STATUS_INIT_ERROR).class(), ErrorClass::Lost);
        // RSMI_STATUS_BUSY and RSMI_STATUS_UNKNOWN_ERROR: try again next poll.
        assert_eq!(CallError::Status(16).class(), ErrorClass::Transient);
        assert_eq!(CallError::Status(0xFFFF_FFFF).class(), ErrorClass::Transient);
    }
}
