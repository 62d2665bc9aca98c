//! OpenTelemetry observable instruments over the cached GPU sample.

use opentelemetry::metrics::{AsyncInstrument, AsyncInstrumentBuilder, Meter};
use opentelemetry::KeyValue;

use crate::names;
use crate::poller::SampleReader;
use crate::source::{DeviceSample, DeviceStatus};

/// Reports the values of one device through `emit(value, extra attribute)`.
type Emitter<T> = fn(&DeviceSample, &mut dyn FnMut(T, Option<KeyValue>));

/// How an instrument aggregates.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Gauge,
    Counter,
}

/// One instrument: its name, unit and description, and what it reports of each answering
/// device.
struct Instrument<T> {
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    kind: Kind,
    each: Emitter<T>,
}

const fn instrument<T>(
    kind: Kind,
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    each: Emitter<T>,
) -> Instrument<T> {
    Instrument { name, unit, description, kind, each }
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

/// An instrument of either value type.
enum AnyInstrument {
    F64(Instrument<f64>),
    U64(Instrument<u64>),
}

/// Every instrument but [`names::STATUS`], in registration order.
const INSTRUMENTS: [AnyInstrument; 12] = [
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_UTILIZATION,
        names::UNIT_RATIO,
        "Fraction of time the GPU engine was busy over the driver's sampling window",
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
        |d, emit| {
            one(d.memory_used_bytes, emit);
        },
    )),
    AnyInstrument::U64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_LIMIT,
        names::UNIT_BYTES,
        "GPU memory installed",
        |d, emit| {
            one(d.memory_total_bytes, emit);
        },
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_MEMORY_UTILIZATION,
        names::UNIT_RATIO,
        "GPU memory in use as a fraction of the installed memory",
        |d, emit| one(d.memory_utilization(), emit),
    )),
    AnyInstrument::F64(instrument(Kind::Gauge, names::POWER, names::UNIT_WATTS, "GPU power draw", |d, emit| {
        one(d.power_watts, emit)
    })),
    AnyInstrument::F64(instrument(
        Kind::Counter,
        names::ENERGY,
        names::UNIT_JOULES,
        "Energy consumed by the GPU since the driver was loaded",
        |d, emit| one(d.energy_joules, emit),
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::TEMPERATURE,
        names::UNIT_CELSIUS,
        "GPU core temperature",
        |d, emit| {
            one(d.temperature_celsius, emit);
        },
    )),
    AnyInstrument::U64(instrument(
        Kind::Counter,
        names::ERRORS,
        names::UNIT_ERRORS,
        "ECC memory errors (aggregate driver counters)",
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
        names::GPU_FAN_SPEED,
        names::UNIT_RATIO,
        "GPU fan speed as a fraction of its maximum",
        |d, emit| {
            for &(fan, v) in &d.fan_speeds {
                emit(v, Some(KeyValue::new(names::GPU_FAN_INDEX, i64::from(fan))));
            }
        },
    )),
    AnyInstrument::F64(instrument(
        Kind::Gauge,
        names::GPU_PCIE_THROUGHPUT,
        names::UNIT_BYTES_PER_SECOND,
        "GPU PCIe throughput over the driver's 20 ms window",
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
        }
    }
    let reader = reader.clone();
    meter
        .i64_observable_up_down_counter(names::STATUS)
        .with_unit(names::UNIT_RATIO)
        .with_description("1 for the GPU's current state, 0 for the others")
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
