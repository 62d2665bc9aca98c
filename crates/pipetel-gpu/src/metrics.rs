//! OpenTelemetry observable instruments over the cached GPU sample.

use opentelemetry::metrics::{AsyncInstrument, AsyncInstrumentBuilder, Meter};
use opentelemetry::KeyValue;

use crate::names;
use crate::poller::SampleReader;
use crate::source::{DeviceSample, DeviceStatus};

/// Reports the values of one device through `emit(value, extra attribute)`.
type Emitter<T> = fn(&DeviceSample, &mut dyn FnMut(T, Option<KeyValue>));

/// How a GPU instrument aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FamilyKind {
    /// A last value.
    Gauge,
    /// A monotonic sum.
    Counter,
    /// Up-down counter: the conventions' instrument for state sets (0 / 1 per state).
    UpDown,
}

type Kind = FamilyKind;

/// One GPU metric family as the reference lists it: the instrument's name, kind, unit and
/// description, and the attributes its series have beside the device's identity (`hw.id`,
/// `hw.name`, `hw.model`, `hw.vendor`, `hw.type`, `hw.gpu.index`, `hw.driver.version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuFamily {
    /// The OTel instrument name.
    pub name: &'static str,
    /// How it aggregates.
    pub kind: FamilyKind,
    /// The UCUM unit.
    pub unit: &'static str,
    /// The instrument's description.
    pub description: &'static str,
    /// The attributes beside the device's identity.
    pub attributes: &'static [&'static str],
}

/// The fan family: one series per fan, the fan its own hardware entity under the GPU.
const FAN: GpuFamily = GpuFamily {
    name: names::FAN_SPEED_RATIO,
    kind: FamilyKind::Gauge,
    unit: names::UNIT_RATIO,
    description: "GPU fan speed as a fraction of its maximum",
    attributes: &[names::HW_PARENT, names::GPU_FAN_INDEX],
};
/// The identity family (always 1).
const INFO: GpuFamily = GpuFamily {
    name: names::GPU_INFO,
    kind: FamilyKind::UpDown,
    unit: names::UNIT_RATIO,
    description: "Always 1; carries the CUDA driver version beside the GPU's identity",
    attributes: &[names::GPU_CUDA_DRIVER_VERSION],
};
/// The state-set family of the device's health.
const STATUS: GpuFamily = GpuFamily {
    name: names::STATUS,
    kind: FamilyKind::UpDown,
    unit: names::UNIT_RATIO,
    description: "1 for the GPU's current state, 0 for the others",
    attributes: &[names::HW_STATE],
};

/// Every GPU family, in registration order.
pub fn families() -> Vec<GpuFamily> {
    let mut all: Vec<GpuFamily> = INSTRUMENTS
        .iter()
        .map(|i| {
            let (name, kind, unit, description, attributes) = match i {
                AnyInstrument::F64(i) => (i.name, i.kind, i.unit, i.description, i.extra),
                AnyInstrument::U64(i) => (i.name, i.kind, i.unit, i.description, i.extra),
                AnyInstrument::I64(i) => (i.name, i.kind, i.unit, i.description, i.extra),
            };
            GpuFamily { name, kind, unit, description, attributes }
        })
        .collect();
    all.extend([FAN, INFO, STATUS]);
    all
}

/// One instrument: its name, unit and description, and what it reports of each answering
/// device.
struct Instrument<T> {
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    kind: Kind,
    /// The attribute each series has beside the device's identity, if any.
    extra: &'static [&'static str],
    each: Emitter<T>,
}

const fn instrument<T>(
    kind: Kind,
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    extra: &'static [&'static str],
    each: Emitter<T>,
) -> Instrument<T> {
    Instrument { name, unit, description, kind, extra, each }
}

/// Emits `value` without an extra attribute, when there is one.
fn one<T>(value: Option<T>, emit: &mut dyn FnMut(T, Option<KeyValue>)) {
    if let Some(v) = value {
        emit(v, None);
    }
}

/// Emits each present value with `key` set to its label.
fn by<T, const N: usize>(
    key: &'static str,
    values: [(Option<T>, &'static str); N],
    emit: &mut dyn FnMut(T, Option<KeyValue>),
) {
    for (value, label) in values {
        if let Some(v) = value {
            emit(v, Some(KeyValue::new(key, label)));
        }
    }
}

/// An instrument of any value type.
enum AnyInstrument {
    F64(Instrument<f64>),
    U64(Instrument<u64>),
    I64(Instrument<i64>),
}

/// 1 when `flag` holds, else 0, for state sets.
fn flag(on: bool) -> i64 {
    i64::from(on)
}

/// Every instrument but [`names::STATUS`], [`names::FAN_SPEED_RATIO`] and [`names::GPU_INFO`]
/// (their series carry other attributes), in registration order.
const INSTRUMENTS: [AnyInstrument; 20] = [
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_UTILIZATION,
        names::UNIT_RATIO,
        "Fraction of time the GPU engine was busy over the driver's sampling window",
        &[names::GPU_TASK],
        |d, emit| {
            let values = [
                (d.utilization, names::task::GENERAL),
                (d.encoder_utilization, names::task::ENCODER),
                (d.decoder_utilization, names::task::DECODER),
            ];
            by(names::GPU_TASK, values, emit);
        },
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_USAGE,
        names::UNIT_BYTES,
        "GPU memory in use",
        &[],
        |d, emit| {
            one(d.memory_used_bytes, emit);
        },
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_LIMIT,
        names::UNIT_BYTES,
        "GPU memory installed",
        &[],
        |d, emit| {
            one(d.memory_total_bytes, emit);
        },
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_UTILIZATION,
        names::UNIT_RATIO,
        "GPU memory in use as a fraction of the installed memory",
        &[],
        |d, emit| one(d.memory_utilization(), emit),
    )),
    AnyInstrument::F64(instrument(Kind::Gauge, names::POWER, names::UNIT_WATTS, "GPU power draw", &[], |d, emit| {
        one(d.power_watts, emit)
    })),
    AnyInstrument::F64(instrument(
        Kind::Counter,
        names::ENERGY,
        names::UNIT_JOULES,
        "Energy consumed by the GPU since the driver was loaded",
        &[],
        |d, emit| one(d.energy_joules, emit),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::TEMPERATURE,
        names::UNIT_CELSIUS,
        "GPU core temperature",
        &[],
        |d, emit| {
            one(d.temperature_celsius, emit);
        },
    )),
    AnyInstrument::U64(instrument(
        Kind::Counter,
        names::ERRORS,
        names::UNIT_ERRORS,
        "ECC memory errors (aggregate driver counters)",
        &[names::ERROR_TYPE],
        |d, emit| {
            let values =
                [(d.ecc_corrected, names::error_type::CORRECTED), (d.ecc_uncorrected, names::error_type::UNCORRECTED)];
            by(names::ERROR_TYPE, values, emit);
        },
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_CLOCK,
        names::UNIT_HERTZ,
        "Current GPU clock frequency",
        &[names::GPU_CLOCK_TYPE],
        |d, emit| {
            let values = [
                (d.clocks.graphics_hz, names::clock::GRAPHICS),
                (d.clocks.sm_hz, names::clock::SM),
                (d.clocks.memory_hz, names::clock::MEMORY),
                (d.clocks.video_hz, names::clock::VIDEO),
            ];
            by(names::GPU_CLOCK_TYPE, values, emit);
        },
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_BANDWIDTH_UTILIZATION,
        names::UNIT_RATIO,
        "Fraction of time GPU memory was being read or written (bandwidth, not capacity)",
        &[],
        |d, emit| one(d.memory_bandwidth_utilization, emit),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_POWER_LIMIT,
        names::UNIT_WATTS,
        "GPU power limit the driver enforces",
        &[],
        |d, emit| one(d.power_limit_watts, emit),
    )),
    AnyInstrument::U64(instrument(
        Kind::Counter,
        names::GPU_XID_ERRORS,
        names::UNIT_ERRORS,
        "GPU XID error events since telemetry started, by XID code",
        &[names::GPU_XID],
        |d, emit| {
            for &(code, n) in &d.xid_errors {
                emit(n, Some(KeyValue::new(names::GPU_XID, code as i64)));
            }
        },
    )),
    AnyInstrument::I64(instrument(
        Kind::UpDown,
        names::GPU_CLOCK_THROTTLE,
        names::UNIT_RATIO,
        "1 for each reason holding the GPU clocks down now, 0 for the other supported reasons",
        &[names::GPU_CLOCK_THROTTLE_REASON],
        |d, emit| {
            for &(reason, on) in &d.throttle_reasons {
                emit(flag(on), Some(KeyValue::new(names::GPU_CLOCK_THROTTLE_REASON, reason)));
            }
        },
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_REMAPPED_ROWS,
        names::UNIT_ROWS,
        "GPU memory rows remapped, by the kind of error that caused it",
        &[names::GPU_MEMORY_ERROR_CAUSE],
        |d, emit| {
            let rows = d.remapped_rows;
            let values = [
                (rows.map(|r| r.correctable), names::memory_cause::CORRECTABLE),
                (rows.map(|r| r.uncorrectable), names::memory_cause::UNCORRECTABLE),
            ];
            by(names::GPU_MEMORY_ERROR_CAUSE, values, emit);
        },
    )),
    AnyInstrument::I64(instrument(
        Kind::UpDown,
        names::GPU_MEMORY_ROW_REMAP_PENDING,
        names::UNIT_RATIO,
        "1 while a GPU memory row remapping waits for a GPU reset",
        &[],
        |d, emit| one(d.remapped_rows.map(|r| flag(r.pending)), emit),
    )),
    AnyInstrument::I64(instrument(
        Kind::UpDown,
        names::GPU_MEMORY_ROW_REMAP_FAILURE,
        names::UNIT_RATIO,
        "1 when a GPU memory row remapping failed",
        &[],
        |d, emit| one(d.remapped_rows.map(|r| flag(r.failure)), emit),
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_RETIRED_PAGES,
        names::UNIT_PAGES,
        "GPU memory pages retired, by the kind of ECC error that caused it",
        &[names::GPU_MEMORY_ERROR_CAUSE],
        |d, emit| {
            let values = [
                (d.retired_pages.single_bit, names::memory_cause::SINGLE_BIT),
                (d.retired_pages.double_bit, names::memory_cause::DOUBLE_BIT),
            ];
            by(names::GPU_MEMORY_ERROR_CAUSE, values, emit);
        },
    )),
    AnyInstrument::I64(instrument(
        Kind::UpDown,
        names::GPU_MEMORY_RETIRED_PAGES_PENDING,
        names::UNIT_RATIO,
        "1 while GPU memory page retirements wait for a reboot",
        &[],
        |d, emit| one(d.retired_pages.pending.map(flag), emit),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_PCIE_THROUGHPUT,
        names::UNIT_BYTES_PER_SECOND,
        "GPU PCIe throughput over the driver's 20 ms window",
        &[names::NETWORK_IO_DIRECTION],
        |d, emit| {
            let values = [
                (d.pcie_tx_bytes_per_second, names::direction::TRANSMIT),
                (d.pcie_rx_bytes_per_second, names::direction::RECEIVE),
            ];
            by(names::NETWORK_IO_DIRECTION, values, emit);
        },
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_PROCESS_MEMORY_USAGE,
        names::UNIT_BYTES,
        "GPU memory used by this process and its descendants",
        &[],
        |d, emit| one(d.process_memory_bytes, emit),
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
    for instrument in &INSTRUMENTS {
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
                obs.observe(1, &with_extra(d, cuda));
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
                    let attrs = with_extra(d, Some(KeyValue::new(names::HW_STATE, state)));
                    obs.observe(i64::from(on), &attrs);
                }
            }
        })
        .build();
}

/// `builder` with the unit, description and callback of `spec`.
fn configure<'a, I, T: 'static>(
    builder: AsyncInstrumentBuilder<'a, I, T>,
    spec: &Instrument<T>,
    reader: &SampleReader,
) -> AsyncInstrumentBuilder<'a, I, T> {
    let (reader, each) = (reader.clone(), spec.each);
    builder
        .with_unit(spec.unit)
        .with_description(spec.description)
        .with_callback(move |obs| observe_devices(&reader, obs, each))
}

fn with_extra(d: &DeviceSample, extra: Option<KeyValue>) -> Vec<KeyValue> {
    let base = d.info.attributes();
    let mut attrs = Vec::with_capacity(base.len() + 1);
    attrs.extend_from_slice(base);
    attrs.extend(extra);
    attrs
}

/// Calls `each` for every answering device of the latest sample.
fn observe_devices<T>(reader: &SampleReader, obs: &dyn AsyncInstrument<T>, each: Emitter<T>) {
    let Some(sample) = reader.latest() else {
        return;
    };
    for d in sample.devices.iter().filter(|d| d.status == DeviceStatus::Ok) {
        each(d, &mut |value, extra| obs.observe(value, &with_extra(d, extra)));
    }
}
