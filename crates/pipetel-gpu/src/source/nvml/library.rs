//! The NVML handle together with the XID event set registered on it and the previous GPM
//! samples taken with it, and the NVML calls `nvml-wrapper` has no safe method for
//! (`nvmlDeviceGetRemappedRows`, `nvmlDeviceGetGpuInstanceId`). The only `unsafe` of the NVML
//! source is here.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::raw::c_uint;

use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::{nvml_sym, nvml_try, NvmlError};
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::struct_wrappers::gpm::GpmMetricResult;
use nvml_wrapper::{Device, EventSet, GpmSample, Nvml};

/// The answer of one GPM metric: its value, or why it has none.
pub(super) type GpmAnswer = Result<GpmMetricResult, NvmlError>;

/// Most events read in one poll: a storm of XIDs must not keep the poller from its values.
const MAX_EVENTS_PER_POLL: usize = 1024;

/// NVML, its XID event set and the previous GPM samples in one owner. The event set and the
/// samples borrow the library (`EventSet<'nvml>`, `GpmSample<'nvml>`); keeping them here, the
/// library boxed so it never moves, lets the source own them together.
#[derive(Debug)]
pub(super) struct Library {
    // Declared before `nvml`: fields drop in order, so the set and the samples are freed while
    // the library they borrow is still initialised.
    events: Option<EventSet<'static>>,
    /// The latest GPM sample of each GPU (`(index, None)`) and MIG GPU instance
    /// (`(index, Some(gpu instance id))`), the start of the next interval. A cell: the poll
    /// reads devices through `&Nvml` borrowed from `self` while it swaps samples.
    gpm: RefCell<HashMap<(u32, Option<u32>), GpmSample<'static>>>,
    nvml: Box<Nvml>,
}

impl Library {
    pub(super) fn new(nvml: Nvml) -> Self {
        Self { events: None, gpm: RefCell::new(HashMap::new()), nvml: Box::new(nvml) }
    }

    /// Takes a GPM sample of device `index` (of its GPU instance `gpu_instance`, for a MIG
    /// instance) and, when a previous one exists, returns the `metrics` over the interval
    /// between the two; `Ok(None)` for the first sample. The new sample starts the next
    /// interval.
    pub(super) fn gpm_interval(
        &self,
        index: u32,
        gpu_instance: Option<u32>,
        metrics: &[GpmMetricId],
    ) -> Result<Option<Vec<GpmAnswer>>, NvmlError> {
        let nvml = self.nvml_for_events();
        let device = nvml.device_by_index(index)?;
        let sample = match gpu_instance {
            None => device.gpm_sample()?,
            Some(gi) => device.gpm_mig_sample(gi)?,
        };
        let mut samples = self.gpm.borrow_mut();
        let Some(previous) = samples.insert((index, gpu_instance), sample) else {
            return Ok(None);
        };
        let Some(current) = samples.get(&(index, gpu_instance)) else {
            return Ok(None);
        };
        gpm_metrics_get(nvml, &previous, current, metrics).map(Some)
    }

    pub(super) fn nvml(&self) -> &Nvml {
        &self.nvml
    }

    /// The library with a lifetime as long as `self`'s event set and GPM samples.
    ///
    /// SAFETY (of the callers): `nvml` is boxed, never moved out of the box nor replaced
    /// while `self` lives, and `events` drops before it. The `'static` reference and every
    /// value borrowing it (`EventSet`, `EventData`, `Device`) stay inside this module: only
    /// indices, codes and metric values leave it.
    fn nvml_for_events(&self) -> &'static Nvml {
        let nvml: *const Nvml = &*self.nvml;
        // SAFETY: see above.
        unsafe { &*nvml }
    }

    /// Registers critical XID events of the devices at `indices` in one event set; returns the
    /// indices registered. A device that cannot deliver them (`NotSupported`, e.g. some
    /// consumer GPUs, or an old driver) is left out, logged at debug.
    pub(super) fn register_xid_events(&mut self, indices: &[u32]) -> Vec<u32> {
        let nvml = self.nvml_for_events();
        let mut registered: Vec<u32> = Vec::new();
        let mut refused: Vec<u32> = Vec::new();
        // A failed registration frees the set (nvml-wrapper's contract): start over without
        // the device that refused.
        'attempt: loop {
            let mut set = match nvml.create_event_set() {
                Ok(set) => set,
                Err(e) => {
                    tracing::debug!(error = %e, "GPU XID events not available (nvmlEventSetCreate)");
                    return Vec::new();
                }
            };
            registered.clear();
            for &index in indices.iter().filter(|i| !refused.contains(i)) {
                let Ok(device) = nvml.device_by_index(index) else {
                    refused.push(index);
                    continue 'attempt;
                };
                match device.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                    Ok(s) => {
                        set = s;
                        registered.push(index);
                    }
                    Err(e) => {
                        tracing::debug!(gpu.index = index, error = %e.error,
                            "GPU XID events not available for this device (nvmlDeviceRegisterEvents)");
                        refused.push(index);
                        continue 'attempt;
                    }
                }
            }
            if !registered.is_empty() {
                self.events = Some(set);
            }
            return registered;
        }
    }

    /// Every XID event queued now, as `(device index, XID code)`, without waiting; and the
    /// error that stopped the read early, if one did (a timeout is the normal end).
    pub(super) fn drain_xid_events(&self) -> (Vec<(u32, u64)>, Option<NvmlError>) {
        let mut events = Vec::new();
        let Some(set) = &self.events else {
            return (events, None);
        };
        while events.len() < MAX_EVENTS_PER_POLL {
            match set.wait(0) {
                Ok(data) => {
                    if !data.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
                        continue;
                    }
                    // NVML gives the code as a value; an unknown one is counted as 0.
                    let code = match data.event_data {
                        Some(XidError::Value(code)) => code,
                        _ => 0,
                    };
                    match data.device.index() {
                        Ok(index) => events.push((index, code)),
                        Err(e) => return (events, Some(e)),
                    }
                }
                Err(NvmlError::Timeout) => return (events, None),
                Err(e) => return (events, Some(e)),
            }
        }
        (events, None)
    }
}

/// `nvmlDeviceGetRemappedRows`: correctable rows, uncorrectable rows, pending, failure.
pub(super) fn remapped_rows(nvml: &Nvml, device: &Device<'_>) -> Result<(u32, u32, bool, bool), NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetRemappedRows.as_ref())?;
    let (mut corr, mut unc, mut pending, mut failure): (c_uint, c_uint, c_uint, c_uint) = (0, 0, 0, 0);
    // SAFETY: the symbol has NVML's signature (nvml-wrapper-sys' bindings); the handle is a
    // live device of `nvml`; the four out-pointers are valid for the call.
    unsafe {
        nvml_try(sym(device.handle(), &mut corr, &mut unc, &mut pending, &mut failure))?;
    }
    Ok((corr, unc, pending != 0, failure != 0))
}

/// `nvmlDeviceGetGpuInstanceId` of a MIG device handle: the GPU instance GPM samples by.
pub(super) fn gpu_instance_id(nvml: &Nvml, mig_device: &Device<'_>) -> Result<u32, NvmlError> {
    let sym = nvml_sym(nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref())?;
    let mut id: c_uint = 0;
    // SAFETY: the symbol has NVML's signature (nvml-wrapper-sys' bindings); the handle is a
    // live device of `nvml`; the out-pointer is valid for the call.
    unsafe {
        nvml_try(sym(mig_device.handle(), &mut id))?;
    }
    Ok(id)
}
