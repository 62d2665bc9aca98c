//! OpenTelemetry observable instruments over the cached GPU sample.

use opentelemetry::metrics::{AsyncInstrument, AsyncInstrumentBuilder, Meter};
use opentelemetry::KeyValue;

use pipetel_core::families::{Family, Instrument as FamilyInstrument, Table};

use crate::names;
use crate::poller::SampleReader;
use crate::source::{DeviceSample, DeviceStatus};

mod activity;
mod instrument;

use instrument::{instrument, AnyInstrument, Instrument, Kind, Values};
use Values::{By, List, One, Series};

// The families below are pipetel's one family type; their attributes are those beside the
// device's identity (`hw.id`, `hw.name`, `hw.model`, `hw.vendor`, `hw.type`, `hw.gpu.index`,
// `hw.driver.version`).

/// The fan family: one series per fan, the fan its own hardware entity under the GPU.
const FAN: Family = Family::new(
    names::FAN_SPEED_RATIO,
    FamilyInstrument::Gauge,
    names::UNIT_RATIO,
    "GPU fan speed as a fraction of its maximum",
    &[names::HW_PARENT, names::GPU_FAN_INDEX],
);
/// The identity family (always 1).
const INFO: Family = Family::new(
    names::GPU_INFO,
    FamilyInstrument::UpDownCounter,
    names::UNIT_RATIO,
    "Always 1; carries the CUDA driver version beside the GPU's identity",
    &[names::GPU_CUDA_DRIVER_VERSION],
);
/// The state-set family of the device's health.
const STATUS: Family = Family::new(
    names::STATUS,
    FamilyInstrument::UpDownCounter,
    names::UNIT_RATIO,
    "1 for the GPU's current state, 0 for the others",
    &[names::HW_STATE],
);

/// Every GPU family, in registration order.
pub fn families() -> Vec<Family> {
    let mut all: Vec<Family> = all_instruments()
        .map(|i| {
            let (name, kind, unit, description, attributes) = match i {
                AnyInstrument::F64(i) => (i.name, i.kind, i.unit, i.description, i.values.attributes()),
                AnyInstrument::U64(i) => (i.name, i.kind, i.unit, i.description, i.values.attributes()),
                AnyInstrument::I64(i) => (i.name, i.kind, i.unit, i.description, i.values.attributes()),
            };
            Family::new(name, kind.instrument(), unit, description, attributes)
        })
        .collect();
    all.extend([FAN, INFO, STATUS]);
    all
}

/// Every instrument of [`INSTRUMENTS`] and of [`activity::INSTRUMENTS`], in registration order.
fn all_instruments() -> impl Iterator<Item = &'static AnyInstrument> {
    INSTRUMENTS.iter().chain(activity::INSTRUMENTS.iter())
}

/// The GPU table of the metrics reference (`pipetel_core::families::reference_with`).
pub fn reference_table() -> Table {
    Table {
        title: "GPUs",
        anchor: "gpu",
        about: "Polled from NVML (or ROCm SMI) in the background, as the OTel hardware semantic conventions name them.",
        families: families(),
        prefix: "",
    }
}

/// 1 when `flag` holds, else 0, for state sets.
fn flag(on: bool) -> i64 {
    i64::from(on)
}

/// Every instrument but [`names::STATUS`], [`names::FAN_SPEED_RATIO`] and [`names::GPU_INFO`]
/// (their series carry other attributes), in registration order.
static INSTRUMENTS: [AnyInstrument; 20] = [
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_UTILIZATION,
        names::UNIT_RATIO,
        "Fraction of time the GPU engine was busy over the driver's sampling window",
        By(
            names::GPU_TASK,
            &[
                (names::task::GENERAL, |d| d.utilization),
                (names::task::ENCODER, |d| d.encoder_utilization),
                (names::task::DECODER, |d| d.decoder_utilization),
            ],
        ),
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_USAGE,
        names::UNIT_BYTES,
        "GPU memory in use (of the GPU, or of one MIG instance with hw.gpu.mig.id)",
        Series(&[names::GPU_MIG_ID], |d, emit| {
            activity::with_mig(d, d.memory_used_bytes, |m| m.memory_used_bytes, emit);
        }),
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_LIMIT,
        names::UNIT_BYTES,
        "GPU memory installed (of the GPU, or of one MIG instance with hw.gpu.mig.id)",
        Series(&[names::GPU_MIG_ID], |d, emit| {
            activity::with_mig(d, d.memory_total_bytes, |m| m.memory_total_bytes, emit);
        }),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_UTILIZATION,
        names::UNIT_RATIO,
        "GPU memory in use as a fraction of the installed memory",
        One(DeviceSample::memory_utilization),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::POWER,
        names::UNIT_WATTS,
        "GPU power draw",
        One(|d| d.power_watts),
    )),
    AnyInstrument::F64(instrument(
        Kind::Counter,
        names::ENERGY,
        names::UNIT_JOULES,
        "Energy consumed by the GPU since the driver was loaded",
        One(|d| d.energy_joules),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::TEMPERATURE,
        names::UNIT_CELSIUS,
        "GPU core temperature",
        One(|d| d.temperature_celsius),
    )),
    AnyInstrument::U64(instrument(
        Kind::Counter,
        names::ERRORS,
        names::UNIT_ERRORS,
        "ECC memory errors (aggregate driver counters)",
        By(
            names::ERROR_TYPE,
            &[
                (names::error_type::CORRECTED, |d| d.ecc_corrected),
                (names::error_type::UNCORRECTED, |d| d.ecc_uncorrected),
            ],
        ),
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_CLOCK,
        names::UNIT_HERTZ,
        "Current GPU clock frequency",
        By(
            names::GPU_CLOCK_TYPE,
            &[
                (names::clock::GRAPHICS, |d| d.clocks.graphics_hz),
                (names::clock::SM, |d| d.clocks.sm_hz),
                (names::clock::MEMORY, |d| d.clocks.memory_hz),
                (names::clock::VIDEO, |d| d.clocks.video_hz),
            ],
        ),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_BANDWIDTH_UTILIZATION,
        names::UNIT_RATIO,
        "Fraction of time GPU memory was being read or written (bandwidth, not capacity)",
        One(|d| d.memory_bandwidth_utilization),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_POWER_LIMIT,
        names::UNIT_WATTS,
        "GPU power limit the driver enforces",
        One(|d| d.power_limit_watts),
    )),
    AnyInstrument::U64(instrument(
        Kind::Counter,
        names::GPU_XID_ERRORS,
        names::UNIT_ERRORS,
        "GPU XID error events since telemetry started, by XID code",
        List(names::GPU_XID, |d, emit| {
            for &(code, n) in &d.xid_errors {
                emit(n, (code as i64).into());
            }
        }),
    )),
    AnyInstrument::I64(instrument(
        Kind::UpDown,
        names::GPU_CLOCK_THROTTLE,
        names::UNIT_RATIO,
        "1 for each reason holding the GPU clocks down now, 0 for the other supported reasons",
        List(names::GPU_CLOCK_THROTTLE_REASON, |d, emit| {
            for &(reason, on) in &d.throttle_reasons {
                emit(flag(on), reason.into());
            }
        }),
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_REMAPPED_ROWS,
        names::UNIT_ROWS,
        "GPU memory rows remapped, by the kind of error that caused it",
        By(
            names::GPU_MEMORY_ERROR_CAUSE,
            &[
                (names::memory_cause::CORRECTABLE, |d| d.remapped_rows.map(|r| r.correctable)),
                (names::memory_cause::UNCORRECTABLE, |d| d.remapped_rows.map(|r| r.uncorrectable)),
            ],
        ),
    )),
    AnyInstrument::I64(instrument(
        Kind::UpDown,
        names::GPU_MEMORY_ROW_REMAP_PENDING,
        names::UNIT_RATIO,
        "1 while a GPU memory row remapping waits for a GPU reset",
        One(|d| d.remapped_rows.map(|r| flag(r.pending))),
    )),
    AnyInstrument::I64(instrument(
        Kind::UpDown,
        names::GPU_MEMORY_ROW_REMAP_FAILURE,
        names::UNIT_RATIO,
        "1 when a GPU memory row remapping failed",
        One(|d| d.remapped_rows.map(|r| flag(r.failure))),
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_RETIRED_PAGES,
        names::UNIT_PAGES,
        "GPU memory pages retired, by the kind of ECC error that caused it",
        By(
            names::GPU_MEMORY_ERROR_CAUSE,
            &[
                (names::memory_cause::SINGLE_BIT, |d| d.retired_pages.single_bit),
                (names::memory_cause::DOUBLE_BIT, |d| d.retired_pages.double_bit),
            ],
        ),
    )),
    AnyInstrument::I64(instrument(
        Kind::UpDown,
        names::GPU_MEMORY_RETIRED_PAGES_PENDING,
        names::UNIT_RATIO,
        "1 while GPU memory page retirements wait for a reboot",
        One(|d| d.retired_pages.pending.map(flag)),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_PCIE_THROUGHPUT,
        names::UNIT_BYTES_PER_SECOND,
        "GPU PCIe throughput: over the poll interval from GPM (Hopper and later), else over the driver's 20 ms window (opt-in)",
        By(
            names::NETWORK_IO_DIRECTION,
            &[
                (names::direction::TRANSMIT, |d| d.pcie_tx_bytes_per_second),
                (names::direction::RECEIVE, |d| d.pcie_rx_bytes_per_second),
            ],
        ),
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_PROCESS_MEMORY_USAGE,
        names::UNIT_BYTES,
        "GPU memory used by one process: this one (and, opted in, each descendant)",
        Series(&[names::PROCESS_PID], |d, emit| {
            activity::per_process(d, |p| p.memory_used_bytes, &[], emit);
        }),
    )),
];

/// Registers every GPU instrument on `meter`. Each callback reads the latest sample from
/// `reader` and nothing else, so a collection never waits on the vendor library; a field a
/// device does not report produces no series, and a device that is not answering produces
/// only its [`names::STATUS`] series.
///
/// Call it once per meter: OpenTelemetry keeps the callbacks for the meter provider's
/// lifetime. With an empty reader (GPU off) the instruments exist but report nothing.
pub fn register_metrics(meter: &Meter, reader: &SampleReader) {
    for instrument in all_instruments() {
        match instrument {
            AnyInstrument::F64(spec @ Instrument { kind: Kind::Gauge, .. }) => {
                configure(meter.f64_observable_gauge(spec.name), spec, reader).build();
            }
            AnyInstrument::F64(spec @ Instrument { kind: Kind::Counter, .. }) => {
                configure(meter.f64_observable_counter(spec.name), spec, reader).build();
            }
            AnyInstrument::U64(spec @ Instrument { kind: Kind::Gauge, .. }) => {
                configure(meter.u64_observable_gauge(spec.name), spec, reader).build();
            }
            AnyInstrument::U64(spec @ Instrument { kind: Kind::Counter, .. }) => {
                configure(meter.u64_observable_counter(spec.name), spec, reader).build();
            }
            AnyInstrument::I64(spec) => {
                configure(meter.i64_observable_up_down_counter(spec.name), spec, reader).build();
            }
            // No instrument of these kinds is declared with these value types.
            AnyInstrument::F64(Instrument { kind: Kind::UpDown, .. })
            | AnyInstrument::U64(Instrument { kind: Kind::UpDown, .. }) => {}
        }
    }
    let fans = reader.clone();
    meter
        .f64_observable_gauge(FAN.name)
        .with_unit(FAN.unit)
        .with_description(FAN.description)
        .with_callback(move |obs| {
            let Some(sample) = fans.latest() else {
                return;
            };
            for d in sample.devices.iter().filter(|d| d.status == DeviceStatus::Ok) {
                for &(fan, v) in &d.fan_speeds {
                    obs.observe(v, &d.info.fan_attributes(fan));
                }
            }
        })
        .build();
    let info = reader.clone();
    meter
        .i64_observable_up_down_counter(INFO.name)
        .with_unit(INFO.unit)
        .with_description(INFO.description)
        .with_callback(move |obs| {
            let Some(sample) = info.latest() else {
                return;
            };
            for d in sample.devices.iter().filter(|d| d.status == DeviceStatus::Ok) {
                let cuda = d.info.cuda_driver_version.clone().map(|v| KeyValue::new(names::GPU_CUDA_DRIVER_VERSION, v));
                obs.observe(1, &with_extra(d, cuda.as_slice()));
            }
        })
        .build();
    let reader = reader.clone();
    meter
        .i64_observable_up_down_counter(STATUS.name)
        .with_unit(STATUS.unit)
        .with_description(STATUS.description)
        .with_callback(move |obs| {
            let Some(sample) = reader.latest() else {
                return;
            };
            for d in &sample.devices {
                let failed = d.status == DeviceStatus::Failed;
                for (state, on) in [(names::state::OK, !failed), (names::state::FAILED, failed)] {
                    let attrs = with_extra(d, &[KeyValue::new(names::HW_STATE, state)]);
                    obs.observe(i64::from(on), &attrs);
                }
            }
        })
        .build();
}

/// `builder` with the unit, description and callback of `spec`.
fn configure<'a, I, T: 'static>(
    builder: AsyncInstrumentBuilder<'a, I, T>,
    spec: &'static Instrument<T>,
    reader: &SampleReader,
) -> AsyncInstrumentBuilder<'a, I, T> {
    let (reader, values) = (reader.clone(), &spec.values);
    builder
        .with_unit(spec.unit)
        .with_description(spec.description)
        .with_callback(move |obs| observe_devices(&reader, obs, values))
}

fn with_extra(d: &DeviceSample, extra: &[KeyValue]) -> Vec<KeyValue> {
    let base = d.info.attributes();
    let mut attrs = Vec::with_capacity(base.len() + extra.len());
    attrs.extend_from_slice(base);
    attrs.extend_from_slice(extra);
    attrs
}

/// Observes `values` of every answering device of the latest sample.
fn observe_devices<T>(reader: &SampleReader, obs: &dyn AsyncInstrument<T>, values: &Values<T>) {
    let Some(sample) = reader.latest() else {
        return;
    };
    for d in sample.devices.iter().filter(|d| d.status == DeviceStatus::Ok) {
        values.emit(d, &mut |value, extra| obs.observe(value, &with_extra(d, extra)));
    }
}
