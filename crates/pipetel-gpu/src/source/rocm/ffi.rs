//! The ROCm SMI bindings: the only `unsafe` code of this crate.
//!
//! `librocm_smi64` is opened with `dlopen` at run time; each symbol is resolved on its own,
//! so a library that lacks one (older or newer ROCm) answers [`CallError::Missing`] for that
//! call only. Every call here is a plain C call that writes its answer through pointers to
//! locals; nothing here decides what an error means (that is [`crate::source::policy`]).

use std::ffi::{c_char, c_void, CStr};

use libloading::Library;

use crate::error::GpuError;

/// `rsmi_status_t`.
pub(super) type Status = u32;

pub(super) const RSMI_STATUS_SUCCESS: Status = 0;
pub(super) const RSMI_STATUS_INVALID_ARGS: Status = 1;
pub(super) const RSMI_STATUS_NOT_SUPPORTED: Status = 2;
pub(super) const RSMI_STATUS_PERMISSION: Status = 4;
pub(super) const RSMI_STATUS_INIT_ERROR: Status = 8;
pub(super) const RSMI_STATUS_NOT_YET_IMPLEMENTED: Status = 9;

/// `rsmi_memory_type_t`: device memory.
const RSMI_MEM_TYPE_VRAM: u32 = 0;
/// `rsmi_temperature_metric_t`: the current reading.
const RSMI_TEMP_CURRENT: u32 = 0;
/// Fan speeds are relative to this value (`RSMI_MAX_FAN_SPEED`); the header says to divide by it.
const RSMI_MAX_FAN_SPEED: f64 = 255.0;

/// `rsmi_clk_type_t`: the clocks pipetel reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(super) enum ClockType {
    /// `RSMI_CLK_TYPE_SYS`, the graphics (system) clock.
    System = 0,
    /// `RSMI_CLK_TYPE_MEM`.
    Memory = 4,
}

/// `rsmi_temperature_type_t`: the edge sensor, and the junction (hotspot) sensor that
/// data-centre parts have instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(super) enum Sensor {
    /// `RSMI_TEMP_TYPE_EDGE`.
    Edge = 0,
    /// `RSMI_TEMP_TYPE_JUNCTION`.
    Junction = 1,
}

/// `rsmi_error_count_t`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ErrorCount {
    pub(super) correctable: u64,
    pub(super) uncorrectable: u64,
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
type TypedU64Fn = unsafe extern "C" fn(u32, u32, *mut u64) -> Status;
type EnergyFn = unsafe extern "C" fn(u32, *mut u64, *mut f32, *mut u64) -> Status;
type TempFn = unsafe extern "C" fn(u32, u32, u32, *mut i64) -> Status;
type EccCountFn = unsafe extern "C" fn(u32, u64, *mut ErrorCount) -> Status;
type ClockFn = unsafe extern "C" fn(u32, u32, *mut c_void) -> Status;
type FanFn = unsafe extern "C" fn(u32, u32, *mut i64) -> Status;

/// Why one call gave no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CallError {
    /// The library does not export the function.
    Missing(&'static str),
    /// The function returned this status.
    Status(Status),
    /// The function succeeded but its answer makes no sense (e.g. a clock table in neither
    /// known layout).
    Unexpected,
}

fn check(status: Status) -> Result<(), CallError> {
    if status == RSMI_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(CallError::Status(status))
    }
}

/// Calls `f` (when the library has it) with a pointer to a fresh `T` and returns the `T`.
fn out<F: Copy, T: Default>(
    f: Option<F>,
    name: &'static str,
    call: impl FnOnce(F, &mut T) -> Status,
) -> Result<T, CallError> {
    let f = f.ok_or(CallError::Missing(name))?;
    let mut value = T::default();
    check(call(f, &mut value))?;
    Ok(value)
}

/// The ROCm SMI entry points pipetel uses, resolved once from the loaded library.
///
/// Every function pointer stays valid while `_library` is loaded: the struct owns the
/// library and is dropped (after `rsmi_shut_down`) as one.
#[derive(Debug)]
pub(super) struct Api {
    init: InitFn,
    shut_down: ShutDownFn,
    num_monitor_devices: CountFn,
    status_string: Option<StatusStringFn>,
    name: Option<NameFn>,
    unique_id: Option<U64Fn>,
    pci_id: Option<U64Fn>,
    busy_percent: Option<U32Fn>,
    memory_total: Option<TypedU64Fn>,
    memory_usage: Option<TypedU64Fn>,
    power_ave: Option<TypedU64Fn>,
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
    /// Loads the library and resolves its symbols; a library without `rsmi_init`,
    /// `rsmi_shut_down` or `rsmi_num_monitor_devices` is "not ROCm SMI".
    pub(super) fn load(path: &str) -> Result<Self, GpuError> {
        // SAFETY: loading runs the library's initialisers; ROCm SMI's only set up its own
        // state. The loaded file is what the user configured or a ROCm SMI name.
        let library = unsafe { Library::new(path) }
            .map_err(|e| GpuError::LibraryNotLoaded { library: path.to_owned(), reason: e.to_string() })?;
        let required = |name: &str| GpuError::LibraryNotLoaded {
            library: path.to_owned(),
            reason: format!("not a ROCm SMI library: symbol {name} not found"),
        };
        // SAFETY (every `symbol` call below): each type is the declaration in rocm_smi.h
        // (ROCm 5.2 to 6.x; none of these signatures changed).
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

    /// `rsmi_init(0)`: the default flags (GPUs only).
    pub(super) fn init(&self) -> Result<(), CallError> {
        // SAFETY: rsmi_init takes its flags by value.
        check(unsafe { (self.init)(0) })
    }

    /// `rsmi_shut_down`, balancing one successful [`Api::init`].
    pub(super) fn shut_down(&self) -> Result<(), CallError> {
        // SAFETY: rsmi_shut_down takes no arguments; after a successful init it releases the
        // library's state, which nothing here uses afterwards.
        check(unsafe { (self.shut_down)() })
    }

    /// The library's text for `error`, with the status number.
    pub(super) fn describe(&self, error: CallError) -> String {
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

    pub(super) fn device_count(&self) -> Result<u32, CallError> {
        // SAFETY: rsmi_num_monitor_devices writes one u32 to a valid pointer.
        out(Some(self.num_monitor_devices), "rsmi_num_monitor_devices", |f, n| unsafe { f(n) })
    }

    pub(super) fn name(&self, dv: u32) -> Result<String, CallError> {
        let f = self.name.ok_or(CallError::Missing("rsmi_dev_name_get"))?;
        let mut buf = [0u8; 256];
        // SAFETY: the library writes at most `len` bytes into `buf`.
        check(unsafe { f(dv, buf.as_mut_ptr().cast(), buf.len()) })?;
        // The text ends at the first NUL inside the buffer; never read past it.
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Ok(String::from_utf8_lossy(&buf[..end]).trim().to_owned())
    }

    pub(super) fn unique_id(&self, dv: u32) -> Result<u64, CallError> {
        // SAFETY: rsmi_dev_unique_id_get writes one u64 to a valid pointer.
        out(self.unique_id, "rsmi_dev_unique_id_get", |f, v| unsafe { f(dv, v) })
    }

    /// `domain << 32 | bus << 8 | device << 3 | function`.
    pub(super) fn pci_id(&self, dv: u32) -> Result<u64, CallError> {
        // SAFETY: rsmi_dev_pci_id_get writes one u64 to a valid pointer.
        out(self.pci_id, "rsmi_dev_pci_id_get", |f, v| unsafe { f(dv, v) })
    }

    /// Mask of the RAS blocks (`rsmi_gpu_block_t` bits) with ECC enabled.
    pub(super) fn ecc_enabled(&self, dv: u32) -> Result<u64, CallError> {
        // SAFETY: rsmi_dev_ecc_enabled_get writes one u64 to a valid pointer.
        out(self.ecc_enabled, "rsmi_dev_ecc_enabled_get", |f, v| unsafe { f(dv, v) })
    }

    pub(super) fn busy_percent(&self, dv: u32) -> Result<u32, CallError> {
        // SAFETY: rsmi_dev_busy_percent_get writes one u32 to a valid pointer.
        out(self.busy_percent, "rsmi_dev_busy_percent_get", |f, v| unsafe { f(dv, v) })
    }

    /// VRAM installed, bytes.
    pub(super) fn memory_total(&self, dv: u32) -> Result<u64, CallError> {
        // SAFETY: rsmi_dev_memory_total_get writes one u64 to a valid pointer.
        out(self.memory_total, "rsmi_dev_memory_total_get", |f, v| unsafe { f(dv, RSMI_MEM_TYPE_VRAM, v) })
    }

    /// VRAM in use, bytes.
    pub(super) fn memory_used(&self, dv: u32) -> Result<u64, CallError> {
        // SAFETY: rsmi_dev_memory_usage_get writes one u64 to a valid pointer.
        out(self.memory_usage, "rsmi_dev_memory_usage_get", |f, v| unsafe { f(dv, RSMI_MEM_TYPE_VRAM, v) })
    }

    /// Average power of sensor 0, microwatts.
    pub(super) fn power_average(&self, dv: u32) -> Result<u64, CallError> {
        // SAFETY: rsmi_dev_power_ave_get writes one u64 to a valid pointer.
        out(self.power_ave, "rsmi_dev_power_ave_get", |f, v| unsafe { f(dv, 0, v) })
    }

    /// Current socket power, microwatts (ROCm 6 data-centre parts).
    pub(super) fn socket_power(&self, dv: u32) -> Result<u64, CallError> {
        // SAFETY: rsmi_dev_current_socket_power_get writes one u64 to a valid pointer.
        out(self.socket_power, "rsmi_dev_current_socket_power_get", |f, v| unsafe { f(dv, v) })
    }

    /// Energy since driver load, joules.
    pub(super) fn energy_joules(&self, dv: u32) -> Result<f64, CallError> {
        let (count, resolution) =
            out(self.energy_count, "rsmi_dev_energy_count_get", |f, (count, resolution): &mut (u64, f32)| {
                let mut timestamp = 0u64;
                // SAFETY: rsmi_dev_energy_count_get writes a u64, an f32 and a u64 to valid
                // pointers.
                unsafe { f(dv, count, resolution, &mut timestamp) }
            })?;
        // The counter counts ticks of `resolution` microjoules.
        let resolution = f64::from(resolution);
        if !resolution.is_finite() || resolution <= 0.0 {
            return Err(CallError::Unexpected);
        }
        Ok(count as f64 * resolution / 1e6)
    }

    /// Current temperature of `sensor`, millidegrees Celsius.
    pub(super) fn temperature(&self, dv: u32, sensor: Sensor) -> Result<i64, CallError> {
        // SAFETY: rsmi_dev_temp_metric_get writes one i64 to a valid pointer.
        out(self.temp_metric, "rsmi_dev_temp_metric_get", |f, v| unsafe { f(dv, sensor as u32, RSMI_TEMP_CURRENT, v) })
    }

    /// ECC error counts of one RAS block.
    pub(super) fn ecc_count(&self, dv: u32, block: u64) -> Result<ErrorCount, CallError> {
        // SAFETY: rsmi_dev_ecc_count_get writes one rsmi_error_count_t to a valid pointer.
        out(self.ecc_count, "rsmi_dev_ecc_count_get", |f, v| unsafe { f(dv, block, v) })
    }

    /// Current frequency of clock `kind`, hertz.
    pub(super) fn clock_hz(&self, dv: u32, kind: ClockType) -> Result<u64, CallError> {
        let f = self.clock_freq.ok_or(CallError::Missing("rsmi_dev_gpu_clk_freq_get"))?;
        let mut buf = FrequencyBuffer([0; 512]);
        // SAFETY: the library writes one rsmi_frequencies_t, at most 280 bytes in any known
        // ROCm version, into a zeroed 512-byte buffer aligned for it.
        check(unsafe { f(dv, kind as u32, std::ptr::addr_of_mut!(buf).cast()) })?;
        current_frequency(&buf.0).ok_or(CallError::Unexpected)
    }

    /// Speed of fan 0 as a fraction of its maximum; `None` for a negative reading.
    pub(super) fn fan_ratio(&self, dv: u32) -> Result<Option<f64>, CallError> {
        // SAFETY: rsmi_dev_fan_speed_get writes one i64 to a valid pointer.
        let speed: i64 = out(self.fan_speed, "rsmi_dev_fan_speed_get", |f, v| unsafe { f(dv, 0, v) })?;
        Ok((speed >= 0).then(|| speed as f64 / RSMI_MAX_FAN_SPEED))
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
}
