//! OpenTelemetry observable instruments over the cached GPU sample.

use opentelemetry::metrics::{AsyncInstrument, Meter};
use opentelemetry::KeyValue;

use crate::names;
use crate::poller::SampleReader;
use crate::source::{DeviceSample, DeviceStatus};

/// Registers every GPU instrument on `meter`. Each callback reads the latest sample from
/// `reader` and nothing else, so a collection never waits on the vendor library; a field a
/// device does not report produces no series, and a device that is not answering produces
/// only its [`names::STATUS`] series.
///
/// Call it once per meter: OpenTelemetry keeps the callbacks for the meter provider's
/// lifetime. With an empty reader (GPU off) the instruments exist but report nothing.
pub fn register_metrics(meter: &Meter, reader: &SampleReader) {
    f64_gauge(
        meter,
        reader,
        names::GPU_UTILIZATION,
        names::UNIT_RATIO,
        "Fraction of time the GPU engine was busy over the driver's sampling window",
        |d, emit| {
            for (value, task) in [
                (d.utilization, names::task::GENERAL),
                (d.encoder_utilization, names::task::ENCODER),
                (d.decoder_utilization, names::task::DECODER),
            ] {
                if let Some(v) = value {
                    emit(v, Some(KeyValue::new(names::GPU_TASK, task)));
                }
            }
        },
    );
    u64_gauge(meter, reader, names::GPU_MEMORY_USAGE, names::UNIT_BYTES, "GPU memory in use", |d, emit| {
        if let Some(v) = d.memory_used_bytes {
            emit(v, None);
        }
    });
    u64_gauge(meter, reader, names::GPU_MEMORY_LIMIT, names::UNIT_BYTES, "GPU memory installed", |d, emit| {
        if let Some(v) = d.memory_total_bytes {
            emit(v, None);
        }
    });
    f64_gauge(
        meter,
        reader,
        names::GPU_MEMORY_UTILIZATION,
        names::UNIT_RATIO,
        "GPU memory in use as a fraction of the installed memory",
        |d, emit| {
            if let Some(v) = d.memory_utilization() {
                emit(v, None);
            }
        },
    );
    f64_gauge(meter, reader, names::POWER, names::UNIT_WATTS, "GPU power draw", |d, emit| {
        if let Some(v) = d.power_watts {
            emit(v, None);
        }
    });
    {
        let reader = reader.clone();
        meter
            .f64_observable_counter(names::ENERGY)
            .with_unit(names::UNIT_JOULES)
            .with_description("Energy consumed by the GPU since the driver was loaded")
            .with_callback(move |obs| {
                observe_devices(&reader, obs, |d, emit| {
                    if let Some(v) = d.energy_joules {
                        emit(v, None);
                    }
                });
            })
            .build();
    }
    f64_gauge(meter, reader, names::TEMPERATURE, names::UNIT_CELSIUS, "GPU core temperature", |d, emit| {
        if let Some(v) = d.temperature_celsius {
            emit(v, None);
        }
    });
    {
        let reader = reader.clone();
        meter
            .u64_observable_counter(names::ERRORS)
            .with_unit(names::UNIT_ERRORS)
            .with_description("ECC memory errors (aggregate driver counters)")
            .with_callback(move |obs| {
                observe_devices(&reader, obs, |d, emit| {
                    for (value, kind) in [
                        (d.ecc_corrected, names::error_type::CORRECTED),
                        (d.ecc_uncorrected, names::error_type::UNCORRECTED),
                    ] {
                        if let Some(v) = value {
                            emit(v, Some(KeyValue::new(names::ERROR_TYPE, kind)));
                        }
                    }
                });
            })
            .build();
    }
    u64_gauge(meter, reader, names::GPU_CLOCK, names::UNIT_HERTZ, "Current GPU clock frequency", |d, emit| {
        for (value, kind) in [
            (d.clocks.graphics_hz, names::clock::GRAPHICS),
            (d.clocks.sm_hz, names::clock::SM),
            (d.clocks.memory_hz, names::clock::MEMORY),
            (d.clocks.video_hz, names::clock::VIDEO),
        ] {
            if let Some(v) = value {
                emit(v, Some(KeyValue::new(names::GPU_CLOCK_TYPE, kind)));
            }
        }
    });
    f64_gauge(
        meter,
        reader,
        names::GPU_FAN_SPEED,
        names::UNIT_RATIO,
        "GPU fan speed as a fraction of its maximum",
        |d, emit| {
            for &(fan, v) in &d.fan_speeds {
                emit(v, Some(KeyValue::new(names::GPU_FAN_INDEX, i64::from(fan))));
            }
        },
    );
    f64_gauge(
        meter,
        reader,
        names::GPU_PCIE_THROUGHPUT,
        names::UNIT_BYTES_PER_SECOND,
        "GPU PCIe throughput over the driver's 20 ms window",
        |d, emit| {
            for (value, dir) in [
                (d.pcie_tx_bytes_per_second, names::direction::TRANSMIT),
                (d.pcie_rx_bytes_per_second, names::direction::RECEIVE),
            ] {
                if let Some(v) = value {
                    emit(v, Some(KeyValue::new(names::NETWORK_IO_DIRECTION, dir)));
                }
            }
        },
    );
    u64_gauge(
        meter,
        reader,
        names::GPU_PROCESS_MEMORY_USAGE,
        names::UNIT_BYTES,
        "GPU memory used by this process and its descendants",
        |d, emit| {
            if let Some(v) = d.process_memory_bytes {
                emit(v, None);
            }
        },
    );
    {
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
}

fn with_extra(d: &DeviceSample, extra: Option<KeyValue>) -> Vec<KeyValue> {
    let base = d.info.attributes();
    let mut attrs = Vec::with_capacity(base.len() + 1);
    attrs.extend_from_slice(base);
    attrs.extend(extra);
    attrs
}

/// Calls `each` for every answering device of the latest sample; `each` reports values
/// through `emit(value, extra attribute)`.
fn observe_devices<T, F>(reader: &SampleReader, obs: &dyn AsyncInstrument<T>, each: F)
where
    F: Fn(&DeviceSample, &mut dyn FnMut(T, Option<KeyValue>)),
{
    let Some(sample) = reader.latest() else {
        return;
    };
    for d in sample.devices.iter().filter(|d| d.status == DeviceStatus::Ok) {
        each(d, &mut |value, extra| obs.observe(value, &with_extra(d, extra)));
    }
}

fn f64_gauge<F>(
    meter: &Meter,
    reader: &SampleReader,
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    each: F,
) where
    F: Fn(&DeviceSample, &mut dyn FnMut(f64, Option<KeyValue>)) + Send + Sync + 'static,
{
    let reader = reader.clone();
    meter
        .f64_observable_gauge(name)
        .with_unit(unit)
        .with_description(description)
        .with_callback(move |obs| observe_devices(&reader, obs, &each))
        .build();
}

fn u64_gauge<F>(
    meter: &Meter,
    reader: &SampleReader,
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    each: F,
) where
    F: Fn(&DeviceSample, &mut dyn FnMut(u64, Option<KeyValue>)) + Send + Sync + 'static,
{
    let reader = reader.clone();
    meter
        .u64_observable_gauge(name)
        .with_unit(unit)
        .with_description(description)
        .with_callback(move |obs| observe_devices(&reader, obs, &each))
        .build();
}
